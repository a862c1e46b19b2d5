// The kernels compiled for AVX-512 (F, BW, CD): this file alone gets the
// AVX-512 flags (CMakeLists.txt), and kernels.cpp calls into it only after
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
#include "ttsim/simd/vec_avx512.h"

namespace mha::ttsim::simd {
namespace avx512 {
using V = VecAvx512;
#include "ttsim/simd/fpu_kernels.inc"

// MVMUL with the products on 32 int16 lanes (AVX-512BW has 16-bit variable
// shifts): every quantity of a group fits 16 bits (exponents within
// [-16384, 381], doubled pieces' products below 2^13, a group's positive
// and negative sums below 2^15). Each group's max and two sums are then
// widened to two vectors of 16 int32 lanes for the Dst adder, which is the
// shared accumulate<>. Bit-identical to group8<> + accumulate<> (tests).
//
// Every fidelity phase shifts all eight product exponents of a group by the
// same constant, so the group max moves with them and each product's
// alignment shift is the same in every phase: only the pieces multiplied
// (and whether the shifted max is still positive) differ. The shifts are
// computed once per group for all phases.
template <int P>
[[gnu::always_inline]] inline void group32(const ARec* ar0, const In1& b, int64_t idx, T (*eg)[2], T (*vg)[2]) {
  __m512i e[8], top;
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    e[i] = _mm512_add_epi16(_mm512_loadu_si512(b.exp16 + idx + i * b.ld), _mm512_set1_epi16(static_cast<short>(ar0[i].exp)));
    top = i == 0 ? e[0] : _mm512_max_epi16(top, e[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) e[i] = _mm512_sub_epi16(top, e[i]);  // the alignment shifts
  const __m512i tops[2] = {_mm512_cvtepi16_epi32(_mm512_castsi512_si256(top)),
                           _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(top, 1))};
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    __m512i pos = _mm512_setzero_si512(), neg = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t j = idx + i * b.ld;
      const __m512i y2 = _mm512_mullo_epi16(_mm512_loadu_si512(b.pc16[p & 1] + j),
                                            _mm512_set1_epi16(static_cast<short>(ar0[p * 32 + i].piece)));
      const __m512i u = _mm512_srlv_epi16(y2, e[i]);
      const __m512i m = _mm512_sub_epi16(u, _mm512_srli_epi16(u, 1));
      const uint64_t w = static_cast<uint64_t>(j) >> 4;
      const int an = ar0[i].neg & 1;
      const __mmask32 kneg = _load_mask32(reinterpret_cast<__mmask32*>(const_cast<uint16_t*>(b.sign16[an] + w)));
      const __mmask32 kpos = _load_mask32(reinterpret_cast<__mmask32*>(const_cast<uint16_t*>(b.sign16[an ^ 1] + w)));
      pos = _mm512_mask_add_epi16(pos, kpos, pos, m);
      neg = _mm512_mask_add_epi16(neg, kneg, neg, m);
    }
    const __m512i shift = _mm512_set1_epi32(-((p & 1) ? 5 : 0) - ((p & 2) ? 7 : 0));
    const __m512i sum16 = _mm512_sub_epi16(pos, neg);  // |sum| < 2^15
    const __m512i sums[2] = {_mm512_cvtepi16_epi32(_mm512_castsi512_si256(sum16)),
                             _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(sum16, 1))};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i tp = _mm512_add_epi32(tops[h], shift);
      const __mmask16 valid = _mm512_cmpgt_epi32_mask(tp, _mm512_setzero_si512());
      eg[p][h] = _mm512_maskz_mov_epi32(valid, tp);
      vg[p][h] = _mm512_maskz_mov_epi32(valid, _mm512_slli_epi32(sums[h], 13));
    }
  }
}

template <bool FP32, int P>
void mvmul32_cols(const ARec* arec, int64_t arec_stride, int64_t rows, const In1& b, int64_t c, int64_t Kt,
                  uint32_t* dst, int64_t ldd) {
  const int phases = P;
  const int64_t kb = 4;
  for (int64_t kt0 = 0; kt0 < Kt; kt0 += kb) {
    const int64_t kt1 = kt0 + kb < Kt ? kt0 + kb : Kt;
    for (int64_t r = 0; r < rows; ++r) {
      T acc[2] = {V::load(dst + r * ldd + c), V::load(dst + r * ldd + c + 16)};
      for (int64_t kt = kt0; kt < kt1; ++kt) {
        asm volatile("" ::: "memory");  // see mvmul_cols
        const ARec* ar0 = arec + r * arec_stride + kt * phases * 32;
        // terms[face][group][phase][half]: all phases of a tile first, then
        // the Dst adds in the LLK's order (phases outer, faces inner).
        T te[2][2][P][2], tv[2][2][P][2];
#pragma GCC unroll 2
        for (int f = 0; f < 2; ++f) {
          const int64_t k = kt * 32 + f * 16;
          group32<P>(ar0 + f * 16, b, k * b.ld + c, te[f][0], tv[f][0]);
          group32<P>(ar0 + f * 16 + 8, b, (k + 8) * b.ld + c, te[f][1], tv[f][1]);
        }
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
          for (int f = 0; f < 2; ++f) {
            acc[0] = accumulate<FP32>(te[f][0][p][0], tv[f][0][p][0], te[f][1][p][0], tv[f][1][p][0], acc[0]);
            acc[1] = accumulate<FP32>(te[f][0][p][1], tv[f][0][p][1], te[f][1][p][1], tv[f][1][p][1], acc[1]);
          }
      }
      V::store(dst + r * ldd + c, acc[0]);
      V::store(dst + r * ldd + c + 16, acc[1]);
    }
  }
}

void mvmul32(const ARec* arec, int64_t arec_stride, int64_t rows, const In1& b, int64_t ncols, int64_t Kt, int phases,
             bool fp32, uint32_t* dst, int64_t ldd) {
  using Fn = void (*)(const ARec*, int64_t, int64_t, const In1&, int64_t, int64_t, uint32_t*, int64_t);
  static const Fn fns[2][4] = {
      {mvmul32_cols<false, 1>, mvmul32_cols<false, 2>, mvmul32_cols<false, 3>, mvmul32_cols<false, 4>},
      {mvmul32_cols<true, 1>, mvmul32_cols<true, 2>, mvmul32_cols<true, 3>, mvmul32_cols<true, 4>}};
  const Fn fn = fns[fp32 ? 1 : 0][phases - 1];
  for (int64_t c = 0; c < ncols; c += 32) fn(arec, arec_stride, rows, b, c, Kt, dst, ldd);
}
}  // namespace avx512

extern const KernelTable kAvx512Table;
const KernelTable kAvx512Table = {Isa::Avx512, VecAvx512::W, avx512::mvmul32, avx512::elwmul, avx512::elwadd,
                                  avx512::exp_fast_approx, avx512::mad_finite, avx512::l1_acc_bf16};

}  // namespace mha::ttsim::simd
