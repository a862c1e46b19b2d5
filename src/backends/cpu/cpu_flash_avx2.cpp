// The flash block kernel (cpu_flash_kernel.inc) on 8-float AVX2+FMA
// vectors (vec::F32x8) with a 6x16 register tile: every machine the
// project builds for runs it.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/cpu_flash_kernel.h"
#include "vec/lanes_avx2.h"

namespace mha::cpu {
namespace flash_avx2 {

struct V : vec::F32x8 {
  static constexpr int64_t R = 6;    // tile rows
  static constexpr int64_t TW = 16;  // tile width: two vectors
  // x in lanes c + t with lo <= c + t < hi, -inf elsewhere.
  static F keep_lanes(F x, int64_t c, int32_t lo, int32_t hi) {
    const __m256i lane =
        _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(c)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));
    return _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), x, _mm256_castsi256_ps(keep));
  }
  static F inf_to_zero(F x) {
    return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ));
  }
  static bool any_ne_one(F x) { return _mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(1.0f), _CMP_NEQ_UQ)) != 0; }
  // C[6, 16] (+)= sum_{k < K} A(r, k) * B[k, 0:16],  A(r, k) = A[r*ars + k*acs].
  // Twelve accumulators, two B vectors and one broadcast fill 15 of the 16 ymm
  // registers: the standard AVX2 sgemm shape. A is addressed through two
  // strides so the same tile serves K·Q^T (A = key rows) and P·V (A = P^T,
  // read down its columns) without transposing either.
  static void tile(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
                        int64_t ldc, bool accumulate) {
    // Named accumulators, not an array: GCC -O2 keeps an array whose loops it
    // does not fully unroll in memory, which costs a store per FMA.
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (accumulate) {
      c00 = _mm256_loadu_ps(C), c01 = _mm256_loadu_ps(C + 8);
      c10 = _mm256_loadu_ps(C + ldc), c11 = _mm256_loadu_ps(C + ldc + 8);
      c20 = _mm256_loadu_ps(C + 2 * ldc), c21 = _mm256_loadu_ps(C + 2 * ldc + 8);
      c30 = _mm256_loadu_ps(C + 3 * ldc), c31 = _mm256_loadu_ps(C + 3 * ldc + 8);
      c40 = _mm256_loadu_ps(C + 4 * ldc), c41 = _mm256_loadu_ps(C + 4 * ldc + 8);
      c50 = _mm256_loadu_ps(C + 5 * ldc), c51 = _mm256_loadu_ps(C + 5 * ldc + 8);
    } else {
      c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    const float* a = A;
    const int64_t a2 = 2 * ars, a3 = 3 * ars, a4 = 4 * ars, a5 = 5 * ars;
    for (int64_t k = 0; k < K; ++k) {
      const __m256 b0 = _mm256_loadu_ps(B);
      const __m256 b1 = _mm256_loadu_ps(B + 8);
      __m256 x;
      x = _mm256_broadcast_ss(a);
      c00 = _mm256_fmadd_ps(x, b0, c00);
      c01 = _mm256_fmadd_ps(x, b1, c01);
      x = _mm256_broadcast_ss(a + ars);
      c10 = _mm256_fmadd_ps(x, b0, c10);
      c11 = _mm256_fmadd_ps(x, b1, c11);
      x = _mm256_broadcast_ss(a + a2);
      c20 = _mm256_fmadd_ps(x, b0, c20);
      c21 = _mm256_fmadd_ps(x, b1, c21);
      x = _mm256_broadcast_ss(a + a3);
      c30 = _mm256_fmadd_ps(x, b0, c30);
      c31 = _mm256_fmadd_ps(x, b1, c31);
      x = _mm256_broadcast_ss(a + a4);
      c40 = _mm256_fmadd_ps(x, b0, c40);
      c41 = _mm256_fmadd_ps(x, b1, c41);
      x = _mm256_broadcast_ss(a + a5);
      c50 = _mm256_fmadd_ps(x, b0, c50);
      c51 = _mm256_fmadd_ps(x, b1, c51);
      a += acs;
      B += ldb;
    }
    _mm256_storeu_ps(C, c00), _mm256_storeu_ps(C + 8, c01);
    _mm256_storeu_ps(C + ldc, c10), _mm256_storeu_ps(C + ldc + 8, c11);
    _mm256_storeu_ps(C + 2 * ldc, c20), _mm256_storeu_ps(C + 2 * ldc + 8, c21);
    _mm256_storeu_ps(C + 3 * ldc, c30), _mm256_storeu_ps(C + 3 * ldc + 8, c31);
    _mm256_storeu_ps(C + 4 * ldc, c40), _mm256_storeu_ps(C + 4 * ldc + 8, c41);
    _mm256_storeu_ps(C + 5 * ldc, c50), _mm256_storeu_ps(C + 5 * ldc + 8, c51);
  }
};

#include "backends/cpu/cpu_flash_kernel.inc"

}  // namespace flash_avx2

void flash_block_avx2(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  flash_avx2::block(a, b, h, qb, s);
}

}  // namespace mha::cpu
