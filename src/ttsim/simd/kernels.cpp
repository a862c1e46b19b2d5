#include "ttsim/simd/kernels.h"

namespace mha::ttsim::simd {

extern const KernelTable kAvx2Table, kAvx2TableBlackhole;
extern const KernelTable kAvx512Table, kAvx512TableBlackhole;

namespace {

// Through the project's one dispatch (src/vec/isa.h); one table per
// instruction set and generation (arch.h), the same instruction sets for
// both.
::mha::vec::ByIsa<const KernelTable*> by_isa(const KernelTable* avx2, const KernelTable* avx512) {
  ::mha::vec::ByIsa<const KernelTable*> b;
  b.at[static_cast<int>(Isa::Avx2)] = avx2;
  b.at[static_cast<int>(Isa::Avx512)] = avx512;
  return b;
}

const ::mha::vec::ByIsa<const KernelTable*>& tables() {
  static const ::mha::vec::ByIsa<const KernelTable*> t = by_isa(&kAvx2Table, &kAvx512Table);
  return t;
}

const ::mha::vec::ByIsa<const KernelTable*>& blackhole_tables() {
  static const ::mha::vec::ByIsa<const KernelTable*> t = by_isa(&kAvx2TableBlackhole, &kAvx512TableBlackhole);
  return t;
}

}  // namespace

const KernelTable* kernels_for(Isa isa, Arch arch) {
  if (isa == Isa::Scalar) return nullptr;
  return (arch == Arch::Blackhole ? blackhole_tables() : tables()).pick(isa);
}

Isa best_isa() { return tables().best()->isa; }

const KernelTable& host_kernels() {
  static const KernelTable& t = *tables().best();
  return t;
}

std::vector<Isa> vector_isas() {
  std::vector<Isa> v;
  for (const KernelTable* t : tables().available()) v.push_back(t->isa);
  return v;
}

}  // namespace mha::ttsim::simd
