#pragma once
// mha's lane types on AVX-512 (F, BW, CD, DQ, VL): F32x16, 16 float lanes,
// and I32x16, 16 int32 lanes whose comparisons give k-register masks; the
// same operations as lanes_avx2.h's F32x8 and I32x8, twice as wide.
//
// Only files built at an AVX-512 level (*_avx512.cpp, *_avx512vnni.cpp:
// src/vec/isa_levels.def) include this; each level's copy lives in its own
// namespace MHA_ISA_NS (see lanes_avx2.h).
#include <immintrin.h>

#include <cstdint>

#include "vec/exp2.h"

#if !defined(MHA_ISA_NS) || !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512CD__) || \
    !defined(__AVX512DQ__) || !defined(__AVX512VL__)
#error "vec/lanes_avx512.h: include it only from *_avx512*.cpp kernel files (src/vec/isa_levels.def)"
#endif

namespace mha::vec {
inline namespace MHA_ISA_NS {

struct F32x16 {
  using F = __m512;
  static constexpr int64_t W = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }  // b when either is NaN
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for t = n + 1.5 * 2^23, n integral in [-127, 0]: t's pattern is
  // 0x4B400000 + n, and 2^n's exponent field n + 127 (0 at n = -127).
  static F pow2i_rounded(F t) {
    const auto biased = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127 - 0x4B400000));
    return _mm512_castsi512_ps(_mm512_slli_epi32(biased, 23));
  }
  static F exp2(F x) { return exp2_nonpositive<F32x16>(x); }  // x <= 0 (vec/exp2.h)
};

struct I32x16 {
  using T = __m512i;
  using M = __mmask16;
  using F = __m512;
  static constexpr int W = 16;
  static T load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(void* p, T v) { _mm512_storeu_si512(p, v); }
  static T set1(int32_t x) { return _mm512_set1_epi32(x); }
  static T zero() { return _mm512_setzero_si512(); }
  static T add(T a, T b) { return _mm512_add_epi32(a, b); }
  static T sub(T a, T b) { return _mm512_sub_epi32(a, b); }
  static T max(T a, T b) { return _mm512_max_epi32(a, b); }
  static T min(T a, T b) { return _mm512_min_epi32(a, b); }
  static T and_(T a, T b) { return _mm512_and_si512(a, b); }
  static T or_(T a, T b) { return _mm512_or_si512(a, b); }
  static T xor_(T a, T b) { return _mm512_xor_si512(a, b); }
  static T sllv(T a, T c) { return _mm512_sllv_epi32(a, c); }
  static T srlv(T a, T c) { return _mm512_srlv_epi32(a, c); }
  static T srav(T a, T c) { return _mm512_srav_epi32(a, c); }
  template <int N> static T slli(T a) { return _mm512_slli_epi32(a, N); }
  template <int N> static T srli(T a) { return _mm512_srli_epi32(a, N); }
  template <int N> static T srai(T a) { return _mm512_srai_epi32(a, N); }
  static T madd16(T a, T b) { return _mm512_madd_epi16(a, b); }
  static T mullo(T a, T b) { return _mm512_mullo_epi32(a, b); }  // low 32 bits of a * b
  static T abs(T a) { return _mm512_abs_epi32(a); }
  static T lzcnt(T x) { return _mm512_lzcnt_epi32(x); }
  static M gt(T a, T b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static M eq(T a, T b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static M mand(M a, M b) { return static_cast<M>(a & b); }
  static M mor(M a, M b) { return static_cast<M>(a | b); }
  static M mnot(M a) { return static_cast<M>(~a); }
  static bool any(M a) { return a != 0; }
  static T select(M m, T a, T b) { return _mm512_mask_blend_epi32(m, b, a); }  // m ? a : b
  static T keep(M m, T a) { return _mm512_maskz_mov_epi32(m, a); }           // m ? a : 0
  // a negated where s is negative (as lanes_avx2.h's, which needs a = 0 where s = 0).
  static T sign_from(T a, T s) { return _mm512_mask_sub_epi32(a, _mm512_movepi32_mask(s), zero(), a); }
  // 32 x int16 lanes (MVMUL's groups). bcast16 reads a dup16'd int32.
  static T bcast16(const int32_t& x) { return _mm512_set1_epi32(x); }
  static T add16(T a, T b) { return _mm512_add_epi16(a, b); }
  static T max16(T a, T b) { return _mm512_max_epi16(a, b); }
  // a where b > 0, else 0.
  static T keep16_pos(T a, T b) {
    return _mm512_maskz_mov_epi16(_mm512_cmpgt_epi16_mask(b, _mm512_setzero_si512()), a);
  }
  // int16 lanes 0-15 (lo32) or 16-31 (hi32) sign-extended to int32.
  static T lo32(T a) { return _mm512_cvtepi16_epi32(_mm512_castsi512_si256(a)); }
  static T hi32(T a) { return _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(a, 1)); }
  static M isnan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static M gtf(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M gef(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static F cvtf(T a) { return _mm512_cvtepi32_ps(a); }
  static T cvtt(F a) { return _mm512_cvttps_epi32(a); }
  static T bits(F a) { return _mm512_castps_si512(a); }
  static F fbits(T a) { return _mm512_castsi512_ps(a); }
};

}  // namespace MHA_ISA_NS
}  // namespace mha::vec
