#pragma once
// mha's lane types on AVX2 (+FMA, F16C): F32x8, 8 float lanes (the cpu
// kernels' arithmetic, the softmax's exp2), and I32x8, 8 int32 lanes with
// all-ones lane masks (tt-sim's FPU/SFPU kernels). Kernels add what only
// they need by deriving from these.
//
// Only files built at the avx2 level (*_avx2.cpp, src/vec/isa_levels.def)
// include this. Everything here lives in the namespace MHA_ISA_NS that the
// build gives each level, so no inline function compiled with one level's
// flags can be the copy the linker keeps for another level's callers.
#include <immintrin.h>

#include <cstdint>

#include "vec/exp2.h"

#if !defined(MHA_ISA_NS) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "vec/lanes_avx2.h: include it only from *_avx2.cpp kernel files (src/vec/isa_levels.def)"
#endif

namespace mha::vec {
inline namespace MHA_ISA_NS {

struct F32x8 {
  using F = __m256;
  static constexpr int64_t W = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }  // b when either is NaN
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  // dst[c * ldd + r] = src[r * lds + c] for an 8x8 block (moves only, so
  // every level's kernels may use it: AVX-512 levels include AVX2).
  static void transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
    F r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = load(src + i * lds);
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
      store(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
      store(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
  }
  // Rounded to the nearest integer (ties to even), still a float.
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for t = n + 1.5 * 2^23, n integral in [-127, 0]: t's pattern is
  // 0x4B400000 + n, and 2^n's exponent field n + 127 (0 at n = -127).
  static F pow2i_rounded(F t) {
    const auto biased = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127 - 0x4B400000));
    return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  }
  static F exp2(F x) { return exp2_nonpositive<F32x8>(x); }  // x <= 0 (vec/exp2.h)
};

// Shifts treat counts as unsigned: a count of 32 or more gives 0
// (sllv/srlv) or the sign fill (srav), which the FPU kernels rely on to
// make "shifted out entirely" free.
struct I32x8 {
  using T = __m256i;
  using M = __m256i;
  using F = __m256;
  static constexpr int W = 8;
  static T load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(void* p, T v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
  static T set1(int32_t x) { return _mm256_set1_epi32(x); }
  static T zero() { return _mm256_setzero_si256(); }
  static T add(T a, T b) { return _mm256_add_epi32(a, b); }
  static T sub(T a, T b) { return _mm256_sub_epi32(a, b); }
  static T max(T a, T b) { return _mm256_max_epi32(a, b); }
  static T min(T a, T b) { return _mm256_min_epi32(a, b); }
  static T and_(T a, T b) { return _mm256_and_si256(a, b); }
  static T or_(T a, T b) { return _mm256_or_si256(a, b); }
  static T xor_(T a, T b) { return _mm256_xor_si256(a, b); }
  static T sllv(T a, T c) { return _mm256_sllv_epi32(a, c); }
  static T srlv(T a, T c) { return _mm256_srlv_epi32(a, c); }
  static T srav(T a, T c) { return _mm256_srav_epi32(a, c); }
  template <int N> static T slli(T a) { return _mm256_slli_epi32(a, N); }
  template <int N> static T srli(T a) { return _mm256_srli_epi32(a, N); }
  template <int N> static T srai(T a) { return _mm256_srai_epi32(a, N); }
  // Pairs of int16 multiplied and added into int32.
  static T madd16(T a, T b) { return _mm256_madd_epi16(a, b); }
  static T mullo(T a, T b) { return _mm256_mullo_epi32(a, b); }  // low 32 bits of a * b
  static T abs(T a) { return _mm256_abs_epi32(a); }
  // Leading zeros of 0 < x < 2^31: clearing the bit below the leading one
  // keeps the float conversion from rounding up to the next power of two.
  static T lzcnt(T x) {
    T y = _mm256_andnot_si256(_mm256_srli_epi32(x, 1), x);
    T e = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(y)), 23);
    return _mm256_sub_epi32(_mm256_set1_epi32(158), e);
  }
  static M gt(T a, T b) { return _mm256_cmpgt_epi32(a, b); }
  static M eq(T a, T b) { return _mm256_cmpeq_epi32(a, b); }
  static M mand(M a, M b) { return _mm256_and_si256(a, b); }
  static M mor(M a, M b) { return _mm256_or_si256(a, b); }
  static M mnot(M a) { return _mm256_xor_si256(a, _mm256_set1_epi32(-1)); }
  static bool any(M a) { return !_mm256_testz_si256(a, a); }
  static T select(M m, T a, T b) { return _mm256_blendv_epi8(b, a, m); }  // m ? a : b
  static T keep(M m, T a) { return _mm256_and_si256(m, a); }             // m ? a : 0
  // a negated where s is negative; a must be 0 where s is 0 (vpsignd zeroes it).
  static T sign_from(T a, T s) { return _mm256_sign_epi32(a, s); }
  // 16 x int16 lanes (MVMUL's groups). bcast16 reads a dup16'd int32.
  static T bcast16(const int32_t& x) { return _mm256_set1_epi32(x); }
  static T add16(T a, T b) { return _mm256_add_epi16(a, b); }
  static T max16(T a, T b) { return _mm256_max_epi16(a, b); }
  // a where b > 0, else 0.
  static T keep16_pos(T a, T b) { return _mm256_and_si256(a, _mm256_cmpgt_epi16(b, _mm256_setzero_si256())); }
  // int16 lanes 0-7 (lo32) or 8-15 (hi32) sign-extended to int32.
  static T lo32(T a) { return _mm256_cvtepi16_epi32(_mm256_castsi256_si128(a)); }
  static T hi32(T a) { return _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a, 1)); }
  // float lanes seen from the integer kernels (F32x8 holds the arithmetic)
  static M isnan(F a) { return _mm256_castps_si256(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }
  static M gtf(F a, F b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
  static M gef(F a, F b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GE_OQ)); }
  static F cvtf(T a) { return _mm256_cvtepi32_ps(a); }
  static T cvtt(F a) { return _mm256_cvttps_epi32(a); }
  static T bits(F a) { return _mm256_castps_si256(a); }
  static F fbits(T a) { return _mm256_castsi256_ps(a); }
};

}  // namespace MHA_ISA_NS
}  // namespace mha::vec
