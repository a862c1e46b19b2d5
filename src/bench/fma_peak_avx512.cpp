// The FMA-peak loop on 16-float AVX-512 vectors (fma_peak.h); only this
// file gets the AVX-512 flags, and it is called only after the CPU check.
#include <immintrin.h>

#include "bench/fma_peak.h"

namespace mha::bench {

// 16 independent accumulators: enough for two FMA pipes of 4-5 cycles'
// latency (at least 8-10 in flight), all in registers.
double fma_loop_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  __m512 c[16];
  for (int i = 0; i < 16; ++i) c[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) c[i] = _mm512_fmadd_ps(c[i], a, b);
  }
  __m512 s = c[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, c[i]);
  // The sum is used (and is finite) so the loop cannot be dropped.
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] > -1.0f ? 2.0 * 16 * 16 * static_cast<double>(iters) : 0.0;
}

}  // namespace mha::bench
