// The decode chunk kernel (cpu_decode_kernel.inc) on 16-float AVX-512
// vectors (vec::F32x16 and the cache formats' decoders), built with the
// avx512 level's flags (src/vec/isa_levels.def); decode_kernel() calls it
// only after checking the CPU.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"
#include "vec/lanes_avx512.h"

#ifndef MHA_DECODE_VNNI
#define MHA_DECODE_VNNI 0  // cpu_decode_avx512vnni.cpp builds this file again with 1
#define MHA_DECODE_NS decode_avx512
#endif

namespace mha::cpu {
namespace MHA_DECODE_NS {

struct V : vec::F32x16 {
  static F load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  // fp16 h -> a vector of its float: one scalar convert, then the broadcast
  // (a word broadcast and a 512-bit convert took AVX-512 q4_0's P.V pass
  // from 5.1 to 5.5 ns/key; AVX2 does that, cpu_decode_avx2.cpp).
  static F half_set1(uint16_t h) { return set1(half(h)); }
  // bfloat8_b's face-row scale bfp_scale(e, 6) (cpu_decode_kernel.inc) in
  // every lane, built as integer bits (a cmov and vpbroadcastd from the
  // general register): P.V 7.4 -> 6.4 ns/key, against vmovd + vbroadcastss
  // after a branch. bfloat4_b keeps that form: its decoding is already
  // shuffle-heavy, and this took its P.V pass from 6.2 to 7.6.
  static F bfp8_scale(unsigned char e) { return _mm512_castsi512_ps(_mm512_set1_epi32(e > 6 ? (e - 6) << 23 : 0)); }
  // Sixteen int8 values times s.
  static F q8(const int8_t* p, F s) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))), s);
  }
  // Sixteen bytes zero-extended to 32-bit lanes, and their low or high
  // nibbles as (nibble - 8) * s (q4_0's values): a table lookup of the
  // nibble's float (nibble - 8), then the scale.
  using I = __m512i;
  static I bytes(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F q4_table() { return _mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8); }
  static F nib_lo(I b, F s) { return _mm512_mul_ps(_mm512_permutexvar_ps(b, q4_table()), s); }  // uses index bits 0-3
  static F nib_hi(I b, F s) { return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), q4_table()), s); }
  // Sixteen bfloat8_b codes (sign at bit 7) times s: sign-extended, so that
  // bit 31 already holds the sign and one ternary-logic op ORs it in.
  static F bfp8(const uint8_t* p, F s) {
    const __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const F m = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(x, _mm512_set1_epi32(127))), s);
    // m | (x & sign bit): truth table 0xF0 | (0xCC & 0xAA) over (m, x, mask)
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(m), x, _mm512_set1_epi32(INT32_MIN), 0xF8));
  }
  // A whole bfloat4_b face row (off is 0): eight bytes hold codes i (low
  // nibble) and i + 8 (high); lanes 0-7 take the low nibbles, 8-15 the high.
  static F bfp4(const uint8_t* p, int64_t, F s) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m512i w = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(b, b));
    const __m512i sh = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    // code (sign above 3 magnitude bits) -> its value in units of the scale, by table
    const F t = _mm512_set_ps(-7, -6, -5, -4, -3, -2, -1, -0.0f, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srlv_epi32(w, sh), t), s);
  }
  // The integer K scores (cpu_decode_kernel.inc): 64 elements of a key per
  // unit, as unsigned bytes (|k| for q8_0 / bfloat8_b, whose negative bytes
  // sg marks, or k + 128 with VNNI; the nibbles for q4_0; 8 + k for
  // bfloat4_b) and each lane's key scale dk: two q8_0 / q4_0 blocks (lanes
  // 0-7 and 8-15), or four block-float face rows (lanes 4f..4f+3 face row f,
  // whose 16 codes fill 128-bit lane f in element order).
  static constexpr int64_t QB = 2;
  using IK = __m512i;
  using SG = __mmask64;
  static uint16_t half_bits16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
  }
  // vpshufb controls (-128: zero). kExpCtl: per 128-bit lane f, every
  // dword = byte f << 24 (where the block-float units hold face row f's
  // shared exponent). kBfp8Ctl[0]: lane f bytes f+1..15 to positions
  // 0..14-f (from R), [1]: bytes 12..12+f to 15-f..15 (from R2).
  // kBfp4Ctl: lane f positions i and 8 + i take byte f + 1 + i.
  alignas(64) static constexpr int8_t kExpCtl[64] = {
      -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0,
      -128, -128, -128, 1, -128, -128, -128, 1, -128, -128, -128, 1, -128, -128, -128, 1,
      -128, -128, -128, 2, -128, -128, -128, 2, -128, -128, -128, 2, -128, -128, -128, 2,
      -128, -128, -128, 3, -128, -128, -128, 3, -128, -128, -128, 3, -128, -128, -128, 3};
  alignas(64) static constexpr int8_t kBfp8Ctl[2][64] = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -128,
       2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -128, -128,
       3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -128, -128, -128,
       4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -128, -128, -128, -128},
      {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 12,
       -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 12, 13,
       -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 12, 13, 14,
       -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 12, 13, 14, 15}};
  alignas(64) static constexpr int8_t kBfp4Ctl[64] = {
      1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8,
      2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9,
      3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 5, 6, 7, 8, 9, 10,
      4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
  static __m512i ctl(const int8_t* c) { return _mm512_load_si512(c); }
  // The face rows' scales from x (lane f holding shared exponent e at byte
  // f): bfp_scale(e, top) = 2^(e - 127 - top) as float bits (e - top) << 23,
  // 0 where e <= top (the bytes' saturating e - top).
  static F bfp_scales(__m512i x, int top) {
    const __m512i e = _mm512_shuffle_epi8(_mm512_subs_epu8(x, _mm512_set1_epi8(static_cast<char>(top))), ctl(kExpCtl));
    return _mm512_castsi512_ps(_mm512_srli_epi32(e, 1));
  }
  // Tail: the row's short last unit, n elements (the rest read as zeros).
  template <CacheDtype D, bool Tail>
  [[gnu::always_inline]] static IK kunit(const unsigned char* r, int64_t d, int64_t n, SG& sg, F& dk) {
    if constexpr (D == CacheDtype::Bfloat8_b) {
      // Four face rows of 17 bytes from p: R = bytes 0..63, R2 = 4..67 (no
      // byte past the unit). Lane f of R holds row f's exponent at byte f
      // (p[17f]) and its codes 17f+1.. at bytes f+1..15; the last f+1 codes
      // are bytes 12..12+f of lane f of R2.
      const unsigned char* p = r + d / 16 * 17;
      __m512i R, R2;
      if constexpr (Tail) {
        const int64_t nb = n / 16 * 17;
        R = _mm512_maskz_loadu_epi8((__mmask64{1} << nb) - 1, p);
        R2 = _mm512_maskz_loadu_epi8((__mmask64{1} << (nb - 4)) - 1, p + 4);
      } else {
        R = _mm512_loadu_si512(p);
        R2 = _mm512_loadu_si512(p + 4);
      }
      dk = bfp_scales(R, 6);
      const __m512i c = _mm512_or_si512(_mm512_shuffle_epi8(R, ctl(kBfp8Ctl[0])), _mm512_shuffle_epi8(R2, ctl(kBfp8Ctl[1])));
      sg = _mm512_movepi8_mask(c);  // the sign bits
#if MHA_DECODE_VNNI
      // k + 128: 128 + m (the sign bit flipped) or 128 - m
      const __m512i t = _mm512_xor_si512(c, _mm512_set1_epi8(-128));
      const IK u = _mm512_mask_sub_epi8(t, sg, _mm512_set1_epi8(-128), t);
      sg = 0;
      return u;
#else
      return _mm512_and_si512(c, _mm512_set1_epi8(127));
#endif
    } else if constexpr (D == CacheDtype::Bfloat4_b) {
      // Four face rows of 9 bytes (36 from p): dwords 2f..2f+3 into lane f
      // put row f's exponent at byte f and its code bytes at f+1..f+8.
      const unsigned char* p = r + d / 16 * 9;
      const int64_t nb = Tail ? n / 16 * 9 : 36;
      const __m512i P = _mm512_permutexvar_epi32(_mm512_set_epi32(9, 8, 7, 6, 7, 6, 5, 4, 5, 4, 3, 2, 3, 2, 1, 0),
                                                 _mm512_maskz_loadu_epi8((__mmask64{1} << nb) - 1, p));
      dk = bfp_scales(P, 2);
      // bytes f+1..f+8 twice; low nibbles (codes 0-7) in the first eight, high (8-15) in the rest
      const __m512i t = _mm512_shuffle_epi8(P, ctl(kBfp4Ctl));
      const __m512i c = _mm512_and_si512(_mm512_mask_blend_epi8(0xFF00FF00FF00FF00ull, t, _mm512_srli_epi16(t, 4)),
                                         _mm512_set1_epi8(15));
      sg = 0;
      // sign-magnitude code -> 8 + value: 0..7 -> 8..15, 8..15 (-0..-7) -> 8..1
      return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_setr_epi8(8, 9, 10, 11, 12, 13, 14, 15, 8, 7, 6, 5, 4, 3, 2, 1)), c);
    } else {
      constexpr bool Half = Tail;  // the row's odd last block alone (the upper lanes read as zero)
      (void)n;
      constexpr int64_t bb = D == CacheDtype::Q8_0 ? 34 : 18;
      const unsigned char *p0 = r + d / 32 * bb, *p1 = p0 + bb;
      const __m256 d0 = _mm256_set1_ps(half(half_bits16(p0)));
      dk = _mm512_insertf32x8(_mm512_castps256_ps512(d0), Half ? _mm256_setzero_ps() : _mm256_set1_ps(half(half_bits16(p1))), 1);
      if constexpr (D == CacheDtype::Q8_0) {
        const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2));
        const __m512i k = _mm512_inserti64x4(_mm512_castsi256_si512(k0),
                                             Half ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)), 1);
#if MHA_DECODE_VNNI
        sg = 0;
        return _mm512_xor_si512(k, _mm512_set1_epi8(-128));  // k + 128 (a Half's zero upper lanes meet zero q codes)
#else
        sg = _mm512_movepi8_mask(k);
        return _mm512_abs_epi8(k);
#endif
      } else {
        sg = 0;
        // lanes [block b's 16 bytes, twice | block b+1's, twice], shifted by 0 / 4 per copy:
        // each block's 16 low nibbles (elements 0-15), then its 16 high ones
        const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + 2));
        const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(x0),
                                                  Half ? _mm_setzero_si128() : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + 2)), 1);
        const __m512i w = _mm512_shuffle_i64x2(_mm512_castsi256_si512(x), _mm512_castsi256_si512(x), _MM_SHUFFLE(1, 1, 0, 0));
        const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
        return _mm512_and_si512(_mm512_srlv_epi64(w, sh), _mm512_set1_epi8(15));
      }
    }
  }
  // The offset kunit's bytes carry: 8 for the nibbles (q4_0, bfloat4_b);
  // for q8_0 and bfloat8_b, none (|k|) or 128 (VNNI's k + 128).
  template <CacheDtype D>
  static constexpr int32_t koff() {
    return D == CacheDtype::Q4_0 || D == CacheDtype::Bfloat4_b ? 8 : MHA_DECODE_VNNI ? 128 : 0;
  }
  // Lane i: the sum of key bytes 4i..4i+3 times query codes q[4i..4i+3],
  // plus corr[i] (the offset's share).
  template <CacheDtype D>
  [[gnu::always_inline]] static IK idot(IK ku, SG sg, const int8_t* q, const int32_t* corr) {
    const __m512i y = _mm512_loadu_si512(q);
#if MHA_DECODE_VNNI
    (void)sg;
    return _mm512_dpbusd_epi32(_mm512_loadu_si512(corr), ku, y);
#else
    if constexpr (koff<D>() == 0) {  // the key's signs onto q
      return _mm512_madd_epi16(_mm512_maddubs_epi16(ku, _mm512_mask_sub_epi8(y, sg, _mm512_setzero_si512(), y)), _mm512_set1_epi16(1));
    } else {
      (void)sg;
      return _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(ku, y), _mm512_set1_epi16(1)), _mm512_loadu_si512(corr));
    }
#endif
  }
  static F cvt(IK x) { return _mm512_cvtepi32_ps(x); }
  static float hsum(F x) { return _mm512_reduce_add_ps(x); }
  // The four sums of a0..a3 at once: each folded to 8 lanes, then three
  // hadds share the shuffles that four reductions would each repeat.
  static void hsum4(F a0, F a1, F a2, F a3, float* out) {
    auto fold = [](F x) {
      return _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    };
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(fold(a0), fold(a1)), _mm256_hadd_ps(fold(a2), fold(a3)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  // Keys per score batch: 4 heads x 4 keys = 16 accumulators.
  static constexpr int KB = 4;
  // a[h][k] (4 heads x 4 keys) -> s[h * ld + k] = scale * sum(a[h][k]): one
  // transposing reduction for the 16 sums (unpack within 128-bit lanes, then
  // across them) instead of a horizontal sum per key and head.
  // Unrolled and inlined so that a[][] stays in registers: as a loop the
  // 16 accumulators went through the stack on every batch of keys.
  [[gnu::always_inline]] static void store_scores(const F a[4][4], float scale, float* s, int64_t ld) {
    F u[4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const F t0 = _mm512_add_ps(_mm512_unpacklo_ps(a[h][0], a[h][1]), _mm512_unpackhi_ps(a[h][0], a[h][1]));
      const F t1 = _mm512_add_ps(_mm512_unpacklo_ps(a[h][2], a[h][3]), _mm512_unpackhi_ps(a[h][2], a[h][3]));
      const __m512d d0 = _mm512_castps_pd(t0), d1 = _mm512_castps_pd(t1);
      u[h] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)), _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
    }
    auto pair = [](F x, F y) {
      return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
    };
    const F r = _mm512_mul_ps(pair(pair(u[0], u[1]), pair(u[2], u[3])), _mm512_set1_ps(scale));
    _mm_storeu_ps(s, _mm512_castps512_ps128(r));
    _mm_storeu_ps(s + ld, _mm512_extractf32x4_ps(r, 1));
    _mm_storeu_ps(s + 2 * ld, _mm512_extractf32x4_ps(r, 2));
    _mm_storeu_ps(s + 3 * ld, _mm512_extractf32x4_ps(r, 3));
  }
  static float hmax(F x) { return _mm512_reduce_max_ps(x); }
};

#include "backends/cpu/cpu_decode_kernel.inc"

}  // namespace MHA_DECODE_NS

#if MHA_DECODE_VNNI
void decode_chunk_avx512vnni(const DecodeChunk& c) { MHA_DECODE_NS::chunk(c); }
#else
void decode_chunk_avx512(const DecodeChunk& c) { MHA_DECODE_NS::chunk(c); }
void decode_widen_avx512(CacheDtype dt, const void* rows, int64_t n, int64_t d, int64_t rb, float* dst, int64_t ld) {
  MHA_DECODE_NS::widen(dt, rows, n, d, rb, dst, ld);
}
DecodeTuning decode_tuning_defaults_avx512(CacheDtype dt) { return MHA_DECODE_NS::defaults(dt); }
#endif

}  // namespace mha::cpu
