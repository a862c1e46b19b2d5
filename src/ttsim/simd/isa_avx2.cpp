// The kernels compiled for AVX2 (the baseline every mha build requires).
#include <cstring>

#include "ttsim/kblock.h"
#include "ttsim/simd/kernels.h"
#include "vec/lanes_avx2.h"

namespace mha::ttsim::simd {
namespace avx2 {
using V = ::mha::vec::I32x8;
using VF = ::mha::vec::F32x8;
// The kernels once per generation (arch.h); Products below serves both.
namespace wormhole {
constexpr Arch kArch = Arch::Wormhole;
#include "ttsim/simd/fpu_kernels.inc"
}  // namespace wormhole
namespace blackhole {
constexpr Arch kArch = Arch::Blackhole;
#include "ttsim/simd/fpu_kernels.inc"
}  // namespace blackhole
using wormhole::T;
// The host-side conversions, once (they do not depend on the generation).
#include "ttsim/simd/host_kernels.inc"

// A group's products on 16 int16 lanes (see group<>). AVX2 has no variable
// 16-bit shift, so the alignment is a multiply. With y the signed product
// of the two pieces (|y| < 2^12) and y2 = 2y (the in1 piece is stored
// doubled), the model's term sign(y) round_half_up(|y| / 2^g) is
//
//   vpmulhrsw(y2 - (y < 0), 2^(14-g))                 for 0 <= g <= 14
//
// vpmulhrsw computes floor((a*b + 2^14) / 2^15), i.e. y / 2^g rounded half
// up; for a negative y the -1 (below the granularity of 2y * 2^(14-g), even)
// breaks exact ties downwards, away from zero, and moves nothing else.
// Every g >= 14 gives 0, as does the multiplier 1 at g = 14, so the shift
// is clamped at 14. The signs ride on the pieces (In1::spc16,
// ARec::spiece), so one vpmullw gives y2.
//
// 2^(14-g) comes from one vpshufb: its high byte is 2^(6-g), which is the
// low byte of 2^(14-(g+8)), so the index word (g, g + 8) looks up both bytes
// in the 16-entry table kPow (indices 0-6 and 15 give 0). The multipliers
// serve every fidelity phase.
struct Products {
  template <int P>
  [[gnu::always_inline]] static void sums(const ARec* ar0, const In1& b, int64_t idx, T top, T (&e)[8], T (&out)[P]) {
    const __m256i kPow = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0,  //
                                          0, 0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i g = _mm256_min_epu16(_mm256_sub_epi16(top, e[i]), _mm256_set1_epi16(14));
      e[i] = _mm256_shuffle_epi8(kPow, _mm256_add_epi16(_mm256_mullo_epi16(g, _mm256_set1_epi16(0x0101)),
                                                        _mm256_set1_epi16(0x0800)));  // 2^(14-g)
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i y2 = _mm256_mullo_epi16(V::load(b.spc16[p & 1] + idx + i * b.ld), V::bcast16(ar0[p * 32 + i].spiece));
        const __m256i m = _mm256_mulhrs_epi16(_mm256_add_epi16(y2, _mm256_srai_epi16(y2, 15)), e[i]);
        sum = _mm256_add_epi16(sum, m);  // |sum| < 2^15
      }
      out[p] = sum;
    }
  }
};

}  // namespace avx2

extern const KernelTable kAvx2Table, kAvx2TableBlackhole;
#define MHA_TABLE(ns)                                                                                     \
  {Isa::Avx2, avx2::V::W, avx2::ns::mvmul<avx2::Products>, avx2::ns::elwmul, avx2::ns::elwadd, \
   avx2::ns::exp_fast_approx, avx2::ns::mad_finite, avx2::ns::l1_acc_bf16, avx2::round_bf16, avx2::quantize_bfp, \
   avx2::decode_in0, avx2::encode_in1_16, avx2::transpose8, avx2::row_max, avx2::pack_bf16, avx2::l1_acc_fp32, \
   avx2::times_one_keeps, avx2::score_exp_store}
const KernelTable kAvx2Table = MHA_TABLE(wormhole);
const KernelTable kAvx2TableBlackhole = MHA_TABLE(blackhole);
#undef MHA_TABLE

}  // namespace mha::ttsim::simd
