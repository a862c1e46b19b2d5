// The flash block kernel (cpu_flash_kernel.inc) on 16-float AVX-512
// vectors (vec::F32x16) with 8x48 and 12x32 register tiles, built with the avx512
// level's flags (src/vec/isa_levels.def); flash_kernel() calls it only
// after checking the CPU.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/cpu_flash_kernel.h"
#include "vec/lanes_avx2.h"  // F32x8::transpose8x8
#include "vec/lanes_avx512.h"

namespace mha::cpu {
namespace flash_avx512 {

struct V : vec::F32x16 {
  // The register tiles (cpu_flash_kernel.inc's tile): 8 keys x 48 queries
  // for the scores and 12 queries x 32 value columns for P.V, 24
  // accumulators each in 32 zmm registers. Per FMA the 8x48 tile loads
  // 0.46 vectors or broadcasts, the 12x32 one 0.58; on Intel cores with two
  // 512-bit FMA ports the wider score tile runs a few % closer to the
  // peak, and P.V's value columns (a multiple of 32) do not allow it.
  static constexpr int kScoreRows = 8, kScoreVecs = 3;
  static constexpr int kPvRows = 12, kPvVecs = 2;
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
};

#include "backends/cpu/cpu_flash_kernel.inc"

}  // namespace flash_avx512

void flash_block_avx512(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  flash_avx512::block(a, b, h, qb, s);
}

}  // namespace mha::cpu
