// The kernels compiled for AVX2 (the baseline every mha build requires).
#include <cstring>

#include "ttsim/kblock.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/simd/vec_avx2.h"

namespace mha::ttsim::simd {
namespace avx2 {
using V = VecAvx2;
#include "ttsim/simd/fpu_kernels.inc"

// MVMUL with the products on 16 int16 lanes, as the AVX-512 kernel does
// (every quantity of a group fits 16 bits; see isa_avx512.cpp), but AVX2
// has no variable 16-bit shift. The alignment is a multiply instead. With
// y the signed product of the two pieces (|y| < 2^12) and y2 = 2y (the in1
// piece is stored doubled), the model's term sign(y) round_half_up(|y| / 2^g)
// is
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
// in the 16-entry table kPow (indices 0-6 and 15 give 0).
//
// As on AVX-512 the multipliers are computed once per group for every
// fidelity phase. The group's max and sum are widened to two vectors of 8
// int32 lanes for the shared accumulate<>.

// The low 16 bits of an ARec field (each fits an int16) in every lane,
// broadcast straight from memory.
[[gnu::always_inline]] inline __m256i bcast16(const int32_t& x) {
  return _mm256_broadcastw_epi16(_mm_loadu_si16(&x));
}

template <int P>
[[gnu::always_inline]] inline void group16(const ARec* ar0, const In1& b, int64_t idx, T (*eg)[2], T (*vg)[2]) {
  const __m256i kPow = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0,  //
                                        0, 0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1, 0);
  __m256i e[8], top;
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    e[i] = _mm256_add_epi16(V::load(b.exp16 + idx + i * b.ld), bcast16(ar0[i].exp));
    top = i == 0 ? e[0] : _mm256_max_epi16(top, e[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const __m256i g = _mm256_min_epu16(_mm256_sub_epi16(top, e[i]), _mm256_set1_epi16(14));
    e[i] = _mm256_shuffle_epi8(kPow, _mm256_add_epi16(_mm256_mullo_epi16(g, _mm256_set1_epi16(0x0101)),
                                                      _mm256_set1_epi16(0x0800)));  // 2^(14-g)
  }
  const __m256i tops[2] = {_mm256_cvtepi16_epi32(_mm256_castsi256_si128(top)),
                           _mm256_cvtepi16_epi32(_mm256_extracti128_si256(top, 1))};
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t j = idx + i * b.ld;
      const __m256i y2 = _mm256_mullo_epi16(V::load(b.spc16[p & 1] + j), bcast16(ar0[p * 32 + i].spiece));
      const __m256i m = _mm256_mulhrs_epi16(_mm256_add_epi16(y2, _mm256_srai_epi16(y2, 15)), e[i]);
      sum = _mm256_add_epi16(sum, m);  // |sum| < 2^15
    }
    const __m256i shift = _mm256_set1_epi32(-((p & 1) ? 5 : 0) - ((p & 2) ? 7 : 0));
    const __m256i sums[2] = {_mm256_cvtepi16_epi32(_mm256_castsi256_si128(sum)),
                             _mm256_cvtepi16_epi32(_mm256_extracti128_si256(sum, 1))};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i tp = _mm256_add_epi32(tops[h], shift);
      const __m256i valid = _mm256_cmpgt_epi32(tp, _mm256_setzero_si256());
      eg[p][h] = _mm256_and_si256(valid, tp);
      vg[p][h] = _mm256_and_si256(valid, _mm256_slli_epi32(sums[h], 13));
    }
  }
}

// Rows of MVMUL for the 16 columns starting at in1 column c: all phases of
// a tile's groups first, then the Dst adds in the LLK's order (phases outer,
// faces inner), as mvmul_cols<>.
template <bool FP32, int P>
void mvmul16_cols(const ARec* arec, int64_t arec_stride, int64_t rows, const In1& b, int64_t c, int64_t Kt,
                  uint32_t* dst, int64_t ldd) {
  const int64_t kb = 4;
  for (int64_t kt0 = 0; kt0 < Kt; kt0 += kb) {
    const int64_t kt1 = kt0 + kb < Kt ? kt0 + kb : Kt;
    for (int64_t r = 0; r < rows; ++r) {
      T acc[2] = {V::load(dst + r * ldd + c), V::load(dst + r * ldd + c + 8)};
      for (int64_t kt = kt0; kt < kt1; ++kt) {
        asm volatile("" ::: "memory");  // see mvmul_cols
        const ARec* ar0 = arec + r * arec_stride + kt * P * 32;
        T te[2][2][P][2], tv[2][2][P][2];  // [face][group][phase][half]
#pragma GCC unroll 2
        for (int f = 0; f < 2; ++f) {
          const int64_t k = kt * 32 + f * 16;
          group16<P>(ar0 + f * 16, b, k * b.ld + c, te[f][0], tv[f][0]);
          group16<P>(ar0 + f * 16 + 8, b, (k + 8) * b.ld + c, te[f][1], tv[f][1]);
        }
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
          for (int f = 0; f < 2; ++f)
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h)
              acc[h] = accumulate<FP32>(te[f][0][p][h], tv[f][0][p][h], te[f][1][p][h], tv[f][1][p][h], acc[h]);
      }
      V::store(dst + r * ldd + c, acc[0]);
      V::store(dst + r * ldd + c + 8, acc[1]);
    }
  }
}

void mvmul16(const ARec* arec, int64_t arec_stride, int64_t rows, const In1& b, int64_t ncols, int64_t Kt, int phases,
             bool fp32, uint32_t* dst, int64_t ldd) {
  using Fn = void (*)(const ARec*, int64_t, int64_t, const In1&, int64_t, int64_t, uint32_t*, int64_t);
  static const Fn fns[2][4] = {
      {mvmul16_cols<false, 1>, mvmul16_cols<false, 2>, mvmul16_cols<false, 3>, mvmul16_cols<false, 4>},
      {mvmul16_cols<true, 1>, mvmul16_cols<true, 2>, mvmul16_cols<true, 3>, mvmul16_cols<true, 4>}};
  const Fn fn = fns[fp32 ? 1 : 0][phases - 1];
  for (int64_t c = 0; c < ncols; c += 16) fn(arec, arec_stride, rows, b, c, Kt, dst, ldd);
}
}  // namespace avx2

extern const KernelTable kAvx2Table;
const KernelTable kAvx2Table = {Isa::Avx2, VecAvx2::W, avx2::mvmul16, avx2::elwmul, avx2::elwadd,
                                avx2::exp_fast_approx, avx2::mad_finite, avx2::l1_acc_bf16};

}  // namespace mha::ttsim::simd
