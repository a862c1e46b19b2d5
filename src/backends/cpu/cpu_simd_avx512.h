#pragma once
// AVX-512 helpers shared by the AVX-512 kernels (cpu_flash_avx512.cpp,
// cpu_decode_avx512.cpp), the only files built with AVX-512 flags that may
// include this. `static`: each including file keeps its own copy, so no
// AVX-512 instance can be the one the linker keeps for an AVX2 caller.
#include <immintrin.h>

namespace mha::cpu::avx512 {

// 2^x for x <= 0: cpu_simd.h's degree-6 fit (exp2_ps) on 16 lanes, so the
// AVX2 and AVX-512 kernels round the same way.
static inline __m512 exp2_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5337577497120947e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3399861054494977e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618519805371761e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550329014658928e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022646248340607e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471824645996e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

}  // namespace mha::cpu::avx512
