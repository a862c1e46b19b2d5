// The decode chunk kernel (cpu_decode_kernel.inc) on 8-float AVX2+FMA
// vectors (vec::F32x8 and the cache formats' decoders): every machine the
// project builds for runs it.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"
#include "vec/lanes_avx2.h"

namespace mha::cpu {
namespace decode_avx2 {

struct V : vec::F32x8 {
  static F load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  // fp16 h -> a vector of its float (q8_0 / q4_0 block scales): the word
  // broadcast, then one vector convert, rather than vpinsrw + a scalar
  // convert + a broadcast (P.V q8_0 10.6 -> 10.0 ns/key, q4_0 11.4 -> 11.0).
  static F half_set1(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }
  // bfloat8_b's face-row scale bfp_scale(e, 6) (cpu_decode_kernel.inc) in
  // every lane: a scalar convert, then the broadcast.
  static F bfp8_scale(unsigned char e) {
    float f = 0.0f;
    const uint32_t u = static_cast<uint32_t>(e - 6) << 23;
    if (e > 6) std::memcpy(&f, &u, 4);
    return set1(f);
  }
  // Eight int8 values times s.
  static F q8(const int8_t* p, F s) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))), s);
  }
  // Eight bytes zero-extended to 32-bit lanes, and their low or high
  // nibbles as (nibble - 8) * s (q4_0's values).
  using I = __m256i;
  static I bytes(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static F nib_lo(I b, F s) {
    const __m256i x = _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(x), s);
  }
  static F nib_hi(I b, F s) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), _mm256_set1_epi32(8))), s);
  }
  // Eight bfloat8_b codes (sign at bit 7) times s: sign-extended, so that
  // bit 31 already holds the sign for the OR (one AND instead of a shift
  // pair).
  static F bfp8(const uint8_t* p, F s) {
    const __m256i x = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const F m = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(x, _mm256_set1_epi32(127))), s);
    return _mm256_or_ps(m, _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(INT32_MIN))));
  }
  // Elements off .. off+7 (off 0 or 8) of a bfloat4_b face row whose eight
  // bytes hold codes i (low nibble) and i + 8 (high): the code's value in
  // units of the scale by two 8-entry tables (vpermps reads the index's low
  // three bits, the magnitude), the negative one where the code's sign bit
  // (moved to bit 31) is set, then the scale. -0 * s and -m * s are the
  // bits of (m * s) | sign.
  static F bfp4(const uint8_t* p, int64_t off, F s) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i code = off ? _mm256_srli_epi32(b, 4) : b;
    const __m256 pos = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), neg = _mm256_setr_ps(-0.0f, -1, -2, -3, -4, -5, -6, -7);
    const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(code, 28));
    return _mm256_mul_ps(_mm256_blendv_ps(_mm256_permutevar8x32_ps(pos, code), _mm256_permutevar8x32_ps(neg, code), sign), s);
  }
  // The integer K scores (cpu_decode_kernel.inc): 32 elements of a key per
  // unit, as unsigned bytes (|k| for q8_0 / bfloat8_b, with the signed
  // bytes kept in sg for their signs; the nibbles for q4_0; 8 + k for
  // bfloat4_b) and each lane's key scale dk: one q8_0 / q4_0 block, or two
  // block-float face rows (128-bit lane f: face row f, in element order).
  static constexpr int64_t QB = 1;  // 32-element blocks per unit
  using IK = __m256i;
  using SG = __m256i;
  // vpshufb controls (-128: zero): every dword = the lane's byte (face row
  // f's shared exponent) << 24, for bfloat8_b's R (bytes 0 and 16 + 1) and
  // bfloat4_b's (bytes 0 and 2 + 7); bfloat4_b's code bytes twice per lane.
  alignas(32) static constexpr int8_t kExp8Ctl[32] = {
      -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0,
      -128, -128, -128, 1, -128, -128, -128, 1, -128, -128, -128, 1, -128, -128, -128, 1};
  alignas(32) static constexpr int8_t kExp4Ctl[32] = {
      -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0, -128, -128, -128, 0,
      -128, -128, -128, 7, -128, -128, -128, 7, -128, -128, -128, 7, -128, -128, -128, 7};
  alignas(32) static constexpr int8_t kBfp4Ctl[32] = {
      1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8,
      8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15};
  static __m256i ctl(const int8_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }
  // bfp_scale(e, top) per lane from x (lane f holding e at the byte ec
  // picks): float bits (e - top) << 23, 0 where e <= top (the bytes'
  // saturating e - top).
  static F bfp_scales(__m256i x, const int8_t* ec, int top) {
    const __m256i e = _mm256_shuffle_epi8(_mm256_subs_epu8(x, _mm256_set1_epi8(static_cast<char>(top))), ctl(ec));
    return _mm256_castsi256_ps(_mm256_srli_epi32(e, 1));
  }
  // Tail: the row's short last unit (block floats: one face row; the upper
  // lanes read as zeros).
  template <CacheDtype D, bool Tail>
  [[gnu::always_inline]] static IK kunit(const unsigned char* r, int64_t d, int64_t, SG& sg, F& dk) {
    if constexpr (D == CacheDtype::Q8_0) {
      const unsigned char* p = r + d / 32 * 34;
      dk = set1(half(half_bits16(p)));
      sg = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
      return _mm256_sign_epi8(sg, sg);
    } else if constexpr (D == CacheDtype::Q4_0) {
      const unsigned char* p = r + d / 32 * 18;
      dk = set1(half(half_bits16(p)));
      sg = _mm256_setzero_si256();
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)), m = _mm_set1_epi8(15);
      return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
    } else if constexpr (D == CacheDtype::Bfloat8_b) {
      // Two face rows of 17 bytes from p: codes at 1..16 and 18..33,
      // exponents at 0 and 17 (byte 1 of R's upper lane).
      const unsigned char* p = r + d / 16 * 17;
      if constexpr (Tail) {
        sg = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 1)));
        dk = bfp_scales(_mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), kExp8Ctl, 6);
      } else {
        sg = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 18), reinterpret_cast<const __m128i*>(p + 1));
        dk = bfp_scales(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), kExp8Ctl, 6);
      }
      return _mm256_and_si256(sg, _mm256_set1_epi8(127));  // |k|; sg's bytes are negative where k's sign is set
    } else {
      // Two face rows of 9 bytes from p: lane 0 = bytes 0..15 (exponent at
      // 0, code bytes 1..8), lane 1 = bytes 2..17 (7, and 8..15).
      const unsigned char* p = r + d / 16 * 9;
      __m256i x;
      if constexpr (Tail) {
        unsigned char b[16] = {};
        std::memcpy(b, p, 9);
        x = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
      } else {
        x = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 2), reinterpret_cast<const __m128i*>(p));
      }
      dk = bfp_scales(x, kExp4Ctl, 2);
      sg = _mm256_setzero_si256();
      const __m256i t = _mm256_shuffle_epi8(x, ctl(kBfp4Ctl));
      const __m256i hi = _mm256_set_epi64x(-1, 0, -1, 0);  // positions 8-15 of each lane: the high nibbles
      const __m256i c = _mm256_and_si256(_mm256_blendv_epi8(t, _mm256_srli_epi16(t, 4), hi), _mm256_set1_epi8(15));
      // sign-magnitude code -> 8 + value: 0..7 -> 8..15, 8..15 (-0..-7) -> 8..1
      const __m128i tab = _mm_setr_epi8(8, 9, 10, 11, 12, 13, 14, 15, 8, 7, 6, 5, 4, 3, 2, 1);
      return _mm256_shuffle_epi8(_mm256_set_m128i(tab, tab), c);
    }
  }
  // The offset kunit's bytes carry: none for q8_0's and bfloat8_b's |k|, 8
  // for the nibbles and bfloat4_b's 8 + k.
  template <CacheDtype D>
  static constexpr int32_t koff() { return D == CacheDtype::Q8_0 || D == CacheDtype::Bfloat8_b ? 0 : 8; }
  // Lane i: the sum of key bytes 4i..4i+3 times query codes q[4i..4i+3],
  // plus corr[i] (the offset's share).
  template <CacheDtype D>
  [[gnu::always_inline]] static IK idot(IK ku, SG sg, const int8_t* q, const int32_t* corr) {
    __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    if constexpr (koff<D>() == 0) y = _mm256_sign_epi8(y, sg);  // the key's signs onto q
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ku, y), _mm256_set1_epi16(1));
    if constexpr (koff<D>() == 0) return p;
    else return _mm256_add_epi32(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr)));
  }
  static F cvt(IK x) { return _mm256_cvtepi32_ps(x); }
  static uint16_t half_bits16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
  }
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
  // Keys per score batch: 4 heads x 2 keys = 8 accumulators (of 16 registers).
  static constexpr int KB = 2;
  // a[h][k] (4 heads x 2 keys) -> s[h * ld + k] = scale * sum(a[h][k]): one
  // transposing reduction for the 8 sums instead of a hsum per key and head.
  // Unrolled and inlined so that a[][] stays in registers: as a loop the
  // 16 accumulators went through the stack on every batch of keys.
  [[gnu::always_inline]] static void store_scores(const F a[4][2], float scale, float* s, int64_t ld) {
    __m256d t[4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h)
      t[h] = _mm256_castps_pd(_mm256_add_ps(_mm256_unpacklo_ps(a[h][0], a[h][1]), _mm256_unpackhi_ps(a[h][0], a[h][1])));
    // per 128-bit lane: [h0 k0, h0 k1, h1 k0, h1 k1] and the same for h2, h3
    const __m256 v01 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(t[0], t[1])), _mm256_castpd_ps(_mm256_unpackhi_pd(t[0], t[1])));
    const __m256 v23 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(t[2], t[3])), _mm256_castpd_ps(_mm256_unpackhi_pd(t[2], t[3])));
    const __m256 r = _mm256_mul_ps(_mm256_add_ps(_mm256_permute2f128_ps(v01, v23, 0x20), _mm256_permute2f128_ps(v01, v23, 0x31)),
                                   _mm256_set1_ps(scale));
    const __m128 lo = _mm256_castps256_ps128(r), hi = _mm256_extractf128_ps(r, 1);
    _mm_storel_pi(reinterpret_cast<__m64*>(s), lo);
    _mm_storeh_pi(reinterpret_cast<__m64*>(s + ld), lo);
    _mm_storel_pi(reinterpret_cast<__m64*>(s + 2 * ld), hi);
    _mm_storeh_pi(reinterpret_cast<__m64*>(s + 3 * ld), hi);
  }
  static float hmax(F x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#include "backends/cpu/cpu_decode_kernel.inc"

}  // namespace decode_avx2

void decode_chunk_avx2(const DecodeChunk& c) { decode_avx2::chunk(c); }
void decode_widen_avx2(CacheDtype dt, const void* rows, int64_t n, int64_t d, int64_t rb, float* dst, int64_t ld) {
  decode_avx2::widen(dt, rows, n, d, rb, dst, ld);
}
DecodeTuning decode_tuning_defaults_avx2(CacheDtype dt) { return decode_avx2::defaults(dt); }

const vec::ByIsa<DecodeKernel>& decode_kernel_set() {
  static const vec::ByIsa<DecodeKernel> k = [] {
    vec::ByIsa<DecodeKernel> b;
    b.at[static_cast<int>(vec::Isa::Avx2)] = decode_chunk_avx2;
    b.at[static_cast<int>(vec::Isa::Avx512)] = decode_chunk_avx512;
    b.at[static_cast<int>(vec::Isa::Avx512Vnni)] = decode_chunk_avx512vnni;
    return b;
  }();
  return k;
}
DecodeKernel decode_kernel() { return decode_kernel_set().best(); }
DecodeWiden decode_widen() {
  static const DecodeWiden w = [] {
    vec::ByIsa<DecodeWiden> b;
    b.at[static_cast<int>(vec::Isa::Avx2)] = decode_widen_avx2;
    b.at[static_cast<int>(vec::Isa::Avx512)] = decode_widen_avx512;
    return b.best();
  }();
  return w;
}
DecodeTuning decode_tuning_defaults(DecodeKernel k, CacheDtype dt) {
  return k == decode_chunk_avx2 ? decode_tuning_defaults_avx2(dt) : decode_tuning_defaults_avx512(dt);
}
const char* decode_kernel_isa(DecodeKernel k) { return vec::isa_name(decode_kernel_set().isa_of(k)); }
std::vector<DecodeKernel> decode_kernels() { return decode_kernel_set().available(); }

}  // namespace mha::cpu
