// The kernels compiled for AVX-512 (F, BW, CD): this file alone gets the
// AVX-512 flags (CMakeLists.txt), and kernels.cpp calls into it only after
// checking the CPU.
//
// GCC 12 reports its own _mm512_undefined_* placeholders inside
// avx512fintrin.h as maybe-uninitialized (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "ttsim/simd/kernels.h"
#include "ttsim/simd/vec_avx512.h"

namespace mha::ttsim::simd {
namespace avx512 {
using V = VecAvx512;
#include "ttsim/simd/fpu_kernels.inc"
}  // namespace avx512

extern const KernelTable kAvx512Table;
const KernelTable kAvx512Table = {Isa::Avx512, VecAvx512::W, avx512::mvmul, avx512::elwmul, avx512::elwadd,
                                  avx512::exp_fast_approx};

}  // namespace mha::ttsim::simd
