#include "ttsim/operands.h"

#include <immintrin.h>

#include <cstring>

#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim::detail {

void decode_in0(const float* a, int64_t lda, int64_t rows, int64_t K, DataFormat f, bool fp32, int phases,
                simd::ARec* out) {
  // encode_srcb(unpack_to_src(x)) for 8 values of K at once on AVX2: only a
  // Float32 input's bf16 truncation (16-bit Dst) reaches the significand
  // bits read here; a tf32 one keeps all ten, and exponent field 0 makes a
  // zero datum whatever the truncation. Each phase's 8 records are then
  // transposed from field vectors to ARecs.
  const __m256i trunc = _mm256_set1_epi32(f == DataFormat::Float32 && !fp32 ? static_cast<int32_t>(0xffff0000u) : -1);
  const __m256i z = _mm256_setzero_si256(), lo16 = _mm256_set1_epi32(0xffff);
  const int64_t per_row = K * phases;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; k += 8) {
      const __m256i u = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + k)), trunc);
      const __m256i e = _mm256_and_si256(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(255));
      const __m256i zero = _mm256_cmpeq_epi32(e, z);
      const __m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 13), _mm256_set1_epi32(0x3ff)),
                                        _mm256_set1_epi32(0x400));
      const __m256i neg = _mm256_srai_epi32(u, 31);
      const __m256i pieces[2] = {_mm256_andnot_si256(zero, _mm256_srli_epi32(m, 4)),
                                 _mm256_andnot_si256(zero, _mm256_slli_epi32(_mm256_and_si256(m, _mm256_set1_epi32(15)), 3))};
      auto dup = [&](__m256i x) { return _mm256_or_si256(_mm256_and_si256(x, lo16), _mm256_slli_epi32(x, 16)); };
      for (int p = 0; p < phases; ++p) {
        // As detail::dot16: the low pieces weigh 2^-5 (SrcA) and 2^-7 (SrcB).
        const int32_t adj = -127 - ((p & 1) ? 5 : 0) - ((p & 2) ? 7 : 0);
        const __m256i ex = dup(_mm256_blendv_epi8(_mm256_add_epi32(e, _mm256_set1_epi32(adj)),
                                                  _mm256_set1_epi32(simd::kZeroExp), zero));
        const __m256i pc = pieces[(p >> 1) & 1];
        const __m256i spc = _mm256_sub_epi32(_mm256_xor_si256(pc, neg), neg);
        const __m256i t0 = _mm256_unpacklo_epi32(ex, dup(pc)), t1 = _mm256_unpackhi_epi32(ex, dup(pc));
        const __m256i t2 = _mm256_unpacklo_epi32(dup(spc), neg), t3 = _mm256_unpackhi_epi32(dup(spc), neg);
        const __m256i r0 = _mm256_unpacklo_epi64(t0, t2), r1 = _mm256_unpackhi_epi64(t0, t2);
        const __m256i r2 = _mm256_unpacklo_epi64(t1, t3), r3 = _mm256_unpackhi_epi64(t1, t3);
        __m256i* o = reinterpret_cast<__m256i*>(out + r * per_row + ((k / 32) * phases + p) * 32 + k % 32);
        _mm256_storeu_si256(o, _mm256_permute2x128_si256(r0, r1, 0x20));
        _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(r2, r3, 0x20));
        _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(r0, r1, 0x31));
        _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(r2, r3, 0x31));
      }
    }
}

int64_t live_rows(const simd::ARec* rec, int64_t rows, int64_t per_row) {
  for (int64_t r = rows; r > 0; --r)
    for (int64_t i = 0; i < per_row; ++i)
      if (rec[(r - 1) * per_row + i].exp != simd::dup16(simd::kZeroExp)) return r;
  return 0;
}

void In1Buffer::resize(int64_t K, int64_t N) {
  ld = N;
  const size_t n = static_cast<size_t>(K * N);
  for (auto* v : {&exp16, &spc16_hi, &spc16_lo})
    if (v->size() < n) v->resize(n);
}

simd::In1 In1Buffer::view(int64_t k0, int64_t c0) const {
  const int64_t o = k0 * ld + c0;
  return {exp16.data() + o, {spc16_hi.data() + o, spc16_lo.data() + o}, ld};
}

namespace {

// encode_srca's fields for 16 Src values on AVX2 (the whole binary requires
// it), as simd::In1 holds them at element offset o: exponent (kZeroExp for
// exponent field 0) and the doubled pieces (hidden + 4 bits, next 5 bits)
// signed.
void encode_in1_16(const uint32_t u[16], In1Buffer& out, int64_t o) {
  __m256i exs[2], shis[2], slos[2];
  for (int h = 0; h < 2; ++h) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u + 8 * h));
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(v, 23), _mm256_set1_epi32(255));
    const __m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 13), _mm256_set1_epi32(0x3ff)),
                                      _mm256_set1_epi32(0x400));
    const __m256i zero = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    const __m256i hi = _mm256_andnot_si256(zero, _mm256_slli_epi32(_mm256_srli_epi32(m, 6), 1));
    const __m256i lo =
        _mm256_andnot_si256(zero, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(m, 1), _mm256_set1_epi32(31)), 1));
    exs[h] = _mm256_blendv_epi8(e, _mm256_set1_epi32(simd::kZeroExp), zero);
    const __m256i sgn = _mm256_srai_epi32(v, 31);
    // The pieces with the operand's sign on them ((x ^ s) - s negates where s = -1).
    shis[h] = _mm256_sub_epi32(_mm256_xor_si256(hi, sgn), sgn);
    slos[h] = _mm256_sub_epi32(_mm256_xor_si256(lo, sgn), sgn);
  }
  // 32 -> 16 bits (every value fits): packs works per 128-bit lane, the
  // permute puts the 16 results back in order.
  auto pack16 = [](__m256i a, __m256i b) { return _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8); };
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.exp16[o]), pack16(exs[0], exs[1]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.spc16_hi[o]), pack16(shis[0], shis[1]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.spc16_lo[o]), pack16(slos[0], slos[1]));
}

// encode_in1_16 for 16 values v0 (the first 8), v1 that are bf16 values
// (their low 16 bits zero, as every non-Float32 tile tensor's are): the
// same fields from the top halves alone, on 16-bit lanes. False (nothing
// written) when a low half is not zero.
bool encode_in1_16_bf16(__m256i v0, __m256i v1, In1Buffer& out, int64_t o) {
  const __m256i lo16 = _mm256_set1_epi32(0xffff);
  if (!_mm256_testz_si256(_mm256_or_si256(v0, v1), lo16)) return false;
  // The top halves in order (packs works per 128-bit lane; the permute
  // restores the order): sign, exponent, 7 mantissa bits.
  const __m256i h = _mm256_permute4x64_epi64(
      _mm256_packus_epi32(_mm256_srli_epi32(v0, 16), _mm256_srli_epi32(v1, 16)), 0xD8);
  const __m256i e = _mm256_and_si256(_mm256_srli_epi16(h, 7), _mm256_set1_epi16(255));
  const __m256i zero = _mm256_cmpeq_epi16(e, _mm256_setzero_si256());
  // The significand's 11 bits are the hidden bit, these 7 and three zeros:
  // the high piece is the hidden bit and the top 4, the low piece the last
  // 3 followed by two zeros; both doubled, then signed (vpsignw: h < 0
  // negates; h = +0 is a zero datum anyway).
  const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(h, 2), _mm256_set1_epi16(0x1e)),
                                     _mm256_set1_epi16(0x20));
  const __m256i lo = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(7)), 3);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.exp16[o]),
                      _mm256_blendv_epi8(e, _mm256_set1_epi16(static_cast<int16_t>(simd::kZeroExp)), zero));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.spc16_hi[o]), _mm256_sign_epi16(_mm256_andnot_si256(zero, hi), h));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(&out.spc16_lo[o]), _mm256_sign_epi16(_mm256_andnot_si256(zero, lo), h));
  return true;
}

// The 8 x 8 block of floats at p (row i at p + i*ld) transposed into
// t[j][c0 + i], j < 8.
void transpose8(const float* p, int64_t ld, float (*t)[16], int c0) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(p + i * ld);
  __m256 a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    b[i] = _mm256_shuffle_ps(a[i], a[i + 2], 0x44);
    b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], 0xee);
    b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0x44);
    b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(&t[j][c0], _mm256_permute2f128_ps(b[j], b[j + 4], 0x20));
    _mm256_storeu_ps(&t[j + 4][c0], _mm256_permute2f128_ps(b[j], b[j + 4], 0x31));
  }
}

}  // namespace

void decode_in1(const float* b, int64_t ks, int64_t ns, int64_t K, int64_t N, DataFormat f, bool fp32, In1Buffer& out,
                int64_t k0) {
  if (ks == 1 && ns != 1 && f != DataFormat::Float32 && K % 8 == 0) {
    // Read transposed (K^T from K's rows): 8 x 16 blocks through two 8 x 8
    // transposes rather than 16 strided loads per encoded row.
    float t[8][16];
    for (int64_t k = 0; k < K; k += 8)
      for (int64_t n0 = 0; n0 < N; n0 += 16) {
        transpose8(b + k + n0 * ns, ns, t, 0);
        transpose8(b + k + (n0 + 8) * ns, ns, t, 8);
        for (int j = 0; j < 8; ++j) {
          const int64_t o = (k0 + k + j) * out.ld + n0;
          const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t[j]));
          const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t[j] + 8));
          if (!encode_in1_16_bf16(v0, v1, out, o)) encode_in1_16(reinterpret_cast<const uint32_t*>(t[j]), out, o);
        }
      }
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      // The 16 Src values (a strided gather when b is read transposed).
      uint32_t u[16];
      if (ns == 1 && f != DataFormat::Float32) {  // already Src values, consecutive
        const float* p = b + k * ks + n0;
        if (encode_in1_16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8)), out,
                               (k0 + k) * out.ld + n0))
          continue;
        std::memcpy(u, p, sizeof u);
      } else {
        for (int64_t j = 0; j < 16; ++j) {
          const float x = unpack_to_src(b[k * ks + (n0 + j) * ns], f, fp32);
          std::memcpy(&u[j], &x, 4);
        }
      }
      encode_in1_16(u, out, (k0 + k) * out.ld + n0);
    }
}

}  // namespace mha::ttsim::detail
