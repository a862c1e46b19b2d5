// The kernels compiled for AVX2 (the baseline every mha build requires).
#include <cstring>

#include "ttsim/kblock.h"
#include "ttsim/simd/kernels.h"
#include "vec/lanes_avx2.h"

namespace mha::ttsim::simd {
namespace avx2 {
using V = ::mha::vec::I32x8;
using VF = ::mha::vec::F32x8;
// normalize<false>'s last step (fpu_kernels.inc): r, the float bits of the
// rounded sum (bf16 precise, +0 for a zero sum), times 2^bias; +0 where the
// exponent falls below 1, a signed Inf where it passes 254. The raw form
// (isa_avx512.cpp's may leave a denormal for flush_bf16) is the same here.
[[gnu::always_inline]] inline V::T place_bf16(V::T r, V::T bias) {
  const V::T sbit = V::and_(r, V::set1(static_cast<int32_t>(0x80000000u)));
  const V::T exp = V::add(V::and_(V::srli<23>(r), V::set1(255)), bias);
  V::T res = V::add(r, V::slli<23>(bias));
  res = V::select(V::gt(exp, V::set1(254)), V::or_(sbit, V::set1(0x7f800000)), res);
  return V::select(V::mor(V::gt(V::set1(1), exp), V::eq(r, V::zero())), V::zero(), res);
}
[[gnu::always_inline]] inline V::T place_bf16_raw(V::T r, V::T bias) { return place_bf16(r, bias); }
[[gnu::always_inline]] inline V::T flush_bf16(V::T x) { return x; }
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

// A group's products on 16 int16 lanes (see group<>). With y the signed
// product of the two pieces (|y| < 2^12) and g its alignment shift, the
// model's term is y / 2^g rounded half away from zero (fpu.cpp dot16): an
// odd function of y. vpmulhrsw(x, m) computes floor((x m + 2^14) / 2^15);
// with x = 4y + sign(y) and m = +-2^(13-g) that is
//
//   floor((y + sign(y)/4 + 2^(g-1)) / 2^g)            (m > 0)
//
// which is the term (the quarter unit breaks an exact tie away from zero,
// and moves nothing else), and with m < 0 the term of -y: the same formula
// on -x. So in0's sign can ride on the multiplier, and the product needs no
// sign of its own: one vpmaddubsw of in0's unsigned pair (|b|, 1)
// (ARec::upair) with in1's signed pair (4 |a| s, s) (In1::pair16) gives
// x = 4 |a| |b| s + s, with in1's sign s (a zero piece gives x = s, which
// every m rounds to 0). Every g >= 14 gives 0 (|x| < 2^14), as does a
// multiplier of 0 or +-1, so g is clamped at 15.
//
// 2^(13-g) comes from one vpshufb: its high byte is 2^(5-g) for g <= 5,
// which is kPow[g + 8], and its low byte kPow[g]; the index word
// (g, g + 0x78) looks both up (a high index of 0x80 or more, g >= 8, gives
// 0). vpsignw then signs it as in0 (ARec::mbase is +-2^13). The
// multipliers serve every fidelity phase, and in0's pair, which depends on
// the phase's SrcB piece alone (p & 2), the phases that share it (the
// record of phase p & 2: one load for HiFi2's two phases).
struct Products {
  template <int P>
  [[gnu::always_inline]] static void sums(const ARec* ar0, const In1& b, int64_t idx, T top, T (&e)[8], T (&out)[P]) {
    const __m256i kPow = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0, 0,  //
                                          0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0, 0);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i g = _mm256_min_epu16(_mm256_sub_epi16(top, e[i]), _mm256_set1_epi16(15));
      const __m256i m = _mm256_shuffle_epi8(kPow, _mm256_add_epi16(_mm256_mullo_epi16(g, _mm256_set1_epi16(0x0101)),
                                                                   _mm256_set1_epi16(0x7800)));  // 2^(13-g)
      e[i] = _mm256_sign_epi16(m, V::bcast16(ar0[i].mbase));
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i x = _mm256_maddubs_epi16(V::bcast16(ar0[(p & 2) * 32 + i].upair), V::load(b.pair16[p & 1] + idx + i * b.ld));
        sum = _mm256_add_epi16(sum, _mm256_mulhrs_epi16(x, e[i]));  // |sum| < 2^15
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
   avx2::decode_in0, avx2::encode_in1_16, avx2::encode_in1_rows, avx2::encode_in1_t, avx2::row_max, avx2::pack_bf16, avx2::l1_acc_fp32, \
   avx2::times_one_keeps, avx2::score_exp_store}
const KernelTable kAvx2Table = MHA_TABLE(wormhole);
const KernelTable kAvx2TableBlackhole = MHA_TABLE(blackhole);
#undef MHA_TABLE

}  // namespace mha::ttsim::simd
