#include "ttsim/simd/kernels.h"

namespace mha::ttsim::simd {

extern const KernelTable kAvx2Table, kAvx2TableBlackhole;
extern const KernelTable kAvx512Table, kAvx512TableBlackhole;

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

namespace {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd");
}

}  // namespace

const KernelTable* kernels_for(Isa isa, Arch arch) {
  static const bool avx512 = cpu_has_avx512();
  const bool bh = arch == Arch::Blackhole;
  if (isa == Isa::Avx2) return bh ? &kAvx2TableBlackhole : &kAvx2Table;
  if (isa == Isa::Avx512 && avx512) return bh ? &kAvx512TableBlackhole : &kAvx512Table;
  return nullptr;
}

Isa best_isa() { return kernels_for(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2; }

std::vector<Isa> vector_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (kernels_for(i)) v.push_back(i);
  return v;
}

}  // namespace mha::ttsim::simd
