#include "ttsim/simd/kernels.h"

namespace mha::ttsim::simd {

extern const KernelTable kAvx2Table;
extern const KernelTable kAvx512Table;

namespace {

// Through the project's one dispatch (src/vec/isa.h).
const ::mha::vec::ByIsa<const KernelTable*>& tables() {
  static const ::mha::vec::ByIsa<const KernelTable*> t = [] {
    ::mha::vec::ByIsa<const KernelTable*> b;
    b.at[static_cast<int>(Isa::Avx2)] = &kAvx2Table;
    b.at[static_cast<int>(Isa::Avx512)] = &kAvx512Table;
    return b;
  }();
  return t;
}

}  // namespace

const KernelTable* kernels_for(Isa isa) { return isa == Isa::Scalar ? nullptr : tables().pick(isa); }

Isa best_isa() { return tables().best()->isa; }

std::vector<Isa> vector_isas() {
  std::vector<Isa> v;
  for (const KernelTable* t : tables().available()) v.push_back(t->isa);
  return v;
}

}  // namespace mha::ttsim::simd
