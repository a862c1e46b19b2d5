// The flash block kernel (cpu_flash_kernel.inc) on 8-float AVX2+FMA
// vectors with the 6x16 register tile of cpu_simd.h: every machine the
// project builds for runs it.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/cpu_flash_kernel.h"
#include "backends/cpu/cpu_simd.h"

namespace mha::cpu {
namespace flash_avx2 {

struct V {
  using F = __m256;
  static constexpr int64_t W = 8;    // floats per vector
  static constexpr int64_t R = 6;    // tile rows
  static constexpr int64_t TW = 16;  // tile width: two vectors
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F mul(F x, F y) { return _mm256_mul_ps(x, y); }
  static F add(F x, F y) { return _mm256_add_ps(x, y); }
  static F sub(F x, F y) { return _mm256_sub_ps(x, y); }
  static F max(F x, F y) { return _mm256_max_ps(x, y); }
  static F fmadd(F x, F y, F z) { return _mm256_fmadd_ps(x, y, z); }
  static F fmsub(F x, F y, F z) { return _mm256_fmsub_ps(x, y, z); }
  static F exp2(F x) { return exp2_ps(x); }
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
  static void tile(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
                   int64_t ldc, bool accumulate) {
    tile_6x16(K, A, ars, acs, B, ldb, C, ldc, accumulate);
  }
};

#include "backends/cpu/cpu_flash_kernel.inc"

}  // namespace flash_avx2

void flash_block_avx2(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  flash_avx2::block(a, b, h, qb, s);
}

}  // namespace mha::cpu
