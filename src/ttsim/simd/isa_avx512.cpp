// The kernels compiled for AVX-512 (src/vec/isa_levels.def): this file alone gets the
// AVX-512 flags, and kernels.cpp calls into it only after
// checking the CPU.
//
// GCC 12 reports its own _mm512_undefined_* placeholders inside
// avx512fintrin.h as maybe-uninitialized (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <cstring>

#include "ttsim/kblock.h"
#include "ttsim/simd/kernels.h"
#include "vec/lanes_avx512.h"

namespace mha::ttsim::simd {
namespace avx512 {
using V = ::mha::vec::I32x16;
using VF = ::mha::vec::F32x16;
// normalize<false>'s last step (fpu_kernels.inc; isa_avx2.cpp's in integer
// lanes): r, the float bits of the rounded sum (bf16 precise, +0 for a zero
// sum), times 2^bias by vscalefps, exact in the normal range and a signed
// Inf above it. Below it, the raw form leaves a denormal or a signed zero
// (exponent field 0), which a Dst add reads as the zero the model gives
// (exponent field 0 is zero to the adder); flush_bf16 makes it +0.
[[gnu::always_inline]] inline V::T place_bf16_raw(V::T r, V::T bias) {
  return _mm512_castps_si512(_mm512_scalef_round_ps(_mm512_castsi512_ps(r), _mm512_cvtepi32_ps(bias),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
[[gnu::always_inline]] inline V::T flush_bf16(V::T x) {
  return _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(x, _mm512_set1_epi32(0x7f800000)), x);
}
[[gnu::always_inline]] inline V::T place_bf16(V::T r, V::T bias) { return flush_bf16(place_bf16_raw(r, bias)); }
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

// A group's products on 32 int16 lanes (see group<>), as the AVX2 kernel
// computes them (isa_avx2.cpp): x = 4y + sign(y) from one vpmaddubsw of the
// pairs, the term vpmulhrsw(x, +-2^(13-g)). AVX-512BW's variable 16-bit
// arithmetic shift builds the signed multiplier from ARec::mbase (+-2^13):
// 2^(13-g) up to g = 13, then 0 or -1 (a count of 16 or more fills with the
// sign), which give 0 as every larger g must. The multipliers serve every
// fidelity phase; per phase a product is 3 vector operations.
struct Products {
  template <int P>
  [[gnu::always_inline]] static void sums(const ARec* ar0, const In1& b, int64_t idx, T top, T (&e)[8], T (&out)[P]) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) e[i] = _mm512_srav_epi16(V::bcast16(ar0[i].mbase), _mm512_sub_epi16(top, e[i]));
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m512i x = _mm512_maddubs_epi16(V::bcast16(ar0[(p & 2) * 32 + i].upair), V::load(b.pair16[p & 1] + idx + i * b.ld));
        sum = _mm512_add_epi16(sum, _mm512_mulhrs_epi16(x, e[i]));  // |sum| < 2^15
      }
      out[p] = sum;
    }
  }
};

}  // namespace avx512

extern const KernelTable kAvx512Table, kAvx512TableBlackhole;
#define MHA_TABLE(ns)                                                                                     \
  {Isa::Avx512, avx512::V::W, avx512::ns::mvmul<avx512::Products>, avx512::ns::elwmul, avx512::ns::elwadd, \
   avx512::ns::exp_fast_approx, avx512::ns::mad_finite, avx512::ns::l1_acc_bf16, avx512::round_bf16, avx512::quantize_bfp, \
   avx512::decode_in0, avx512::encode_in1_16, avx512::encode_in1_rows, avx512::encode_in1_t, avx512::row_max, avx512::pack_bf16, avx512::l1_acc_fp32, \
   avx512::times_one_keeps, avx512::score_exp_store}
const KernelTable kAvx512Table = MHA_TABLE(wormhole);
const KernelTable kAvx512TableBlackhole = MHA_TABLE(blackhole);
#undef MHA_TABLE

}  // namespace mha::ttsim::simd
