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

// A group's products on 32 int16 lanes (see group<>), aligned with
// AVX-512BW's variable 16-bit shifts: with the in1 piece stored doubled,
// u = 2y >> g is y / 2^(g-1) truncated, and u - u/2 = ceil(u/2) is y / 2^g
// rounded half up (u = 2y when g = 0; 0 once g >= 16, as every product
// below 2^13 needs). The magnitudes are summed apart by sign, the masks
// loaded straight from In1::sign16 (its complement when the in0 datum is
// negative), and subtracted: both sums stay below 2^15.
struct Products {
  template <int P>
  [[gnu::always_inline]] static void sums(const ARec* ar0, const In1& b, int64_t idx, T top, T (&e)[8], T (&out)[P]) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) e[i] = _mm512_sub_epi16(top, e[i]);  // the alignment shifts
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m512i pos = _mm512_setzero_si512(), neg = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int64_t j = idx + i * b.ld;
        const __m512i y2 = _mm512_mullo_epi16(V::load(b.pc16[p & 1] + j), V::bcast16(ar0[p * 32 + i].piece));
        const __m512i u = _mm512_srlv_epi16(y2, e[i]);
        const __m512i m = _mm512_sub_epi16(u, _mm512_srli_epi16(u, 1));
        const uint64_t w = static_cast<uint64_t>(j) >> 4;
        const int an = ar0[i].neg & 1;
        const __mmask32 kneg = _load_mask32(reinterpret_cast<__mmask32*>(const_cast<uint16_t*>(b.sign16[an] + w)));
        const __mmask32 kpos = _load_mask32(reinterpret_cast<__mmask32*>(const_cast<uint16_t*>(b.sign16[an ^ 1] + w)));
        pos = _mm512_mask_add_epi16(pos, kpos, pos, m);
        neg = _mm512_mask_add_epi16(neg, kneg, neg, m);
      }
      out[p] = _mm512_sub_epi16(pos, neg);
    }
  }
};

}  // namespace avx512

extern const KernelTable kAvx512Table, kAvx512TableBlackhole;
#define MHA_TABLE(ns)                                                                                     \
  {Isa::Avx512, avx512::V::W, avx512::ns::mvmul<avx512::Products>, avx512::ns::elwmul, avx512::ns::elwadd, \
   avx512::ns::exp_fast_approx, avx512::ns::mad_finite, avx512::ns::l1_acc_bf16}
const KernelTable kAvx512Table = MHA_TABLE(wormhole);
const KernelTable kAvx512TableBlackhole = MHA_TABLE(blackhole);
#undef MHA_TABLE

}  // namespace mha::ttsim::simd
