// The probes' AVX2 loops (the FMA peak's, fma_peak.h, and the read
// bandwidth's, probes.h): built with the avx2 level's flags
// (src/vec/isa_levels.def) like every other *_avx2.cpp kernel, so no file
// outside the per-level ones holds intrinsics.
#include <immintrin.h>

#include <cstdint>

#include "bench/fma_peak.h"
#include "bench/probes.h"

namespace mha::bench {

// As fma_loop_avx512, on 8-float AVX2 vectors: 12 accumulators (AVX2 has 16
// registers; two hold a and b).
double fma_loop_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  __m256 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = _mm256_fmadd_ps(c[i], a, b);
  }
  __m256 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, c[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] > -1.0f ? 2.0 * 8 * 12 * static_cast<double>(iters) : 0.0;
}

// Sums n floats (n a multiple of 64) with eight independent accumulators so
// that the loop is bound by loads, not by the add latency.
float read_sum_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

}  // namespace mha::bench
