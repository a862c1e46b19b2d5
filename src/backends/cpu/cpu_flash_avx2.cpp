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
  // The register tile (cpu_flash_kernel.inc's tile) for both products:
  // 6 rows x 16 lanes, twelve accumulators, two B vectors and a broadcast
  // in 15 of the 16 ymm registers, the standard AVX2 sgemm shape.
  static constexpr int kScoreRows = 6, kScoreVecs = 2;
  static constexpr int kPvRows = 6, kPvVecs = 2;
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
};

#include "backends/cpu/cpu_flash_kernel.inc"

}  // namespace flash_avx2

void flash_block_avx2(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  flash_avx2::block(a, b, h, qb, s);
}

}  // namespace mha::cpu
