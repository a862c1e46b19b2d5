// The decode chunk kernel (cpu_decode_kernel.inc) on 8-float AVX2+FMA
// vectors: every machine the project builds for runs it.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_simd.h"

namespace mha::cpu {
namespace decode_avx2 {

struct V {
  using F = __m256;
  static constexpr int64_t W = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(F x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The four sums of a0..a3 at once: three hadds share the shuffles that
  // four separate hsums would each repeat (the score pass's hot spot).
  static void hsum4(F a0, F a1, F a2, F a3, float* out) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  static float hmax(F x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // 2^x for x <= 0: the flash kernel's fit (cpu_simd.h).
  static F exp2(F x) { return exp2_ps(x); }
};

#include "backends/cpu/cpu_decode_kernel.inc"

}  // namespace decode_avx2

void decode_chunk_avx2(const DecodeChunk& c) { decode_avx2::chunk(c); }

namespace {
bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
}  // namespace

DecodeKernel decode_kernel() {
  static const bool avx512 = cpu_has_avx512();
  return avx512 ? decode_chunk_avx512 : decode_chunk_avx2;
}
const char* decode_kernel_isa() { return decode_kernel() == decode_chunk_avx512 ? "avx512" : "avx2"; }

}  // namespace mha::cpu
