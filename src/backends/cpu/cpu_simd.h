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
  __m256 c[6][2];
  for (int r = 0; r < 6; ++r) {
    c[r][0] = accumulate ? _mm256_loadu_ps(C + r * ldc) : _mm256_setzero_ps();
    c[r][1] = accumulate ? _mm256_loadu_ps(C + r * ldc + 8) : _mm256_setzero_ps();
  }
  const float* a0 = A;
  const float* a1 = A + ars;
  const float* a2 = A + 2 * ars;
  const float* a3 = A + 3 * ars;
  const float* a4 = A + 4 * ars;
  const float* a5 = A + 5 * ars;
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(B);
    const __m256 b1 = _mm256_loadu_ps(B + 8);
    __m256 a;
    a = _mm256_broadcast_ss(a0);
    c[0][0] = _mm256_fmadd_ps(a, b0, c[0][0]);
    c[0][1] = _mm256_fmadd_ps(a, b1, c[0][1]);
    a = _mm256_broadcast_ss(a1);
    c[1][0] = _mm256_fmadd_ps(a, b0, c[1][0]);
    c[1][1] = _mm256_fmadd_ps(a, b1, c[1][1]);
    a = _mm256_broadcast_ss(a2);
    c[2][0] = _mm256_fmadd_ps(a, b0, c[2][0]);
    c[2][1] = _mm256_fmadd_ps(a, b1, c[2][1]);
    a = _mm256_broadcast_ss(a3);
    c[3][0] = _mm256_fmadd_ps(a, b0, c[3][0]);
    c[3][1] = _mm256_fmadd_ps(a, b1, c[3][1]);
    a = _mm256_broadcast_ss(a4);
    c[4][0] = _mm256_fmadd_ps(a, b0, c[4][0]);
    c[4][1] = _mm256_fmadd_ps(a, b1, c[4][1]);
    a = _mm256_broadcast_ss(a5);
    c[5][0] = _mm256_fmadd_ps(a, b0, c[5][0]);
    c[5][1] = _mm256_fmadd_ps(a, b1, c[5][1]);
    a0 += acs, a1 += acs, a2 += acs, a3 += acs, a4 += acs, a5 += acs;
    B += ldb;
  }
  for (int r = 0; r < 6; ++r) {
    _mm256_storeu_ps(C + r * ldc, c[r][0]);
    _mm256_storeu_ps(C + r * ldc + 8, c[r][1]);
  }
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
