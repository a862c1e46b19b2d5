#pragma once
// AVX2+FMA building blocks of the flash attention kernel: a 6x16 register
// tile matrix product and a vectorised 2^x.
#include <immintrin.h>

#include <cstdint>

namespace mha::cpu {

// C[6, 16] (+)= sum_{k < K} A(r, k) * B[k, 0:16],  A(r, k) = A[r*ars + k*acs].
// Twelve accumulators, two B vectors and one broadcast fill 15 of the 16 ymm
// registers: the standard AVX2 sgemm shape. A is addressed through two
// strides so the same tile serves K·Q^T (A = key rows) and P·V (A = P^T,
// read down its columns) without transposing either.
inline void tile_6x16(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
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

// 2^x for x <= 0 (the softmax only ever exponentiates differences to a
// running maximum). x = n + f with |f| <= 1/2; 2^f by a degree-6 fit
// (relative error 1.6e-8 in exact arithmetic, so float rounding dominates);
// 2^n built in the exponent field. Below -127 (and for -inf) the result is 0:
// n = -127 gives an all-zero bit pattern.
inline __m256 exp2_ps(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.5337577497120947e-4f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3399861054494977e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618519805371761e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550329014658928e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022646248340607e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471824645996e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

}  // namespace mha::cpu
