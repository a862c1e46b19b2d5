// The kernels compiled for AVX2 (the baseline every mha build requires).
#include <cstring>

#include "ttsim/simd/kernels.h"
#include "ttsim/simd/vec_avx2.h"

namespace mha::ttsim::simd {
namespace avx2 {
using V = VecAvx2;
#include "ttsim/simd/fpu_kernels.inc"
}  // namespace avx2

extern const KernelTable kAvx2Table;
const KernelTable kAvx2Table = {Isa::Avx2, VecAvx2::W, avx2::mvmul, avx2::elwmul, avx2::elwadd, avx2::exp_fast_approx,
                                avx2::mad_finite};

}  // namespace mha::ttsim::simd
