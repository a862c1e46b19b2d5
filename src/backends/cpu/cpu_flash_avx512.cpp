// The flash block kernel (cpu_flash_kernel.inc) on 16-float AVX-512
// vectors (vec::F32x16) with a 12x32 register tile, built with the avx512
// level's flags (src/vec/isa_levels.def); flash_kernel() calls it only
// after checking the CPU.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/cpu_flash_kernel.h"
#include "vec/lanes_avx512.h"

namespace mha::cpu {
namespace flash_avx512 {

struct V : vec::F32x16 {
  static constexpr int64_t R = 12;   // tile rows
  static constexpr int64_t TW = 32;  // tile width: two vectors
  // x in lanes c + t with lo <= c + t < hi, -inf elsewhere.
  static F keep_lanes(F x, int64_t c, int32_t lo, int32_t hi) {
    const __m512i lane = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(c)),
                                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 keep = _mm512_cmpge_epi32_mask(lane, _mm512_set1_epi32(lo)) &
                           _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(hi));
    return _mm512_mask_blend_ps(keep, _mm512_set1_ps(-__builtin_inff()), x);
  }
  static F inf_to_zero(F x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), x,
                                _mm512_setzero_ps());
  }
  static bool any_ne_one(F x) { return _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) != 0; }
  // C[12, 32] (+)= sum_{k < K} A(r, k) * B[k, 0:32], A(r, k) = A[r*ars + k*acs]:
  // 24 accumulators, two B vectors and a broadcast in 27 of the 32 zmm
  // registers. The loops over rows are unrolled whole, so the accumulator
  // arrays live in registers.
  static void tile(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
                   int64_t ldc, bool accumulate) {
    F c0[R], c1[R];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      c0[r] = accumulate ? _mm512_loadu_ps(C + r * ldc) : _mm512_setzero_ps();
      c1[r] = accumulate ? _mm512_loadu_ps(C + r * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; ++k) {
      const F b0 = _mm512_loadu_ps(B), b1 = _mm512_loadu_ps(B + 16);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        const F x = _mm512_set1_ps(A[r * ars]);
        c0[r] = _mm512_fmadd_ps(x, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(x, b1, c1[r]);
      }
      A += acs;
      B += ldb;
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(C + r * ldc, c0[r]);
      _mm512_storeu_ps(C + r * ldc + 16, c1[r]);
    }
  }
};

#include "backends/cpu/cpu_flash_kernel.inc"

}  // namespace flash_avx512

void flash_block_avx512(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  flash_avx512::block(a, b, h, qb, s);
}

}  // namespace mha::cpu
