#include "ttsim/formats.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tensor/half.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::ttsim {

const char* format_name(DataFormat f) {
  switch (f) {
    case DataFormat::Float32: return "float32";
    case DataFormat::Bfloat16: return "bfloat16";
    case DataFormat::Bfp8_b: return "bfloat8_b";
    case DataFormat::Bfp4_b: return "bfloat4_b";
  }
  return "?";
}

DataFormat format_from_name(const std::string& name) {
  if (name == "float32") return DataFormat::Float32;
  if (name == "bfloat16") return DataFormat::Bfloat16;
  if (name == "bfloat8_b") return DataFormat::Bfp8_b;
  if (name == "bfloat4_b") return DataFormat::Bfp4_b;
  throw InputError("unknown tt-sim dtype '" + printable(name) +
                   "': expected one of float32, bfloat16, bfloat8_b, bfloat4_b");
}

const std::vector<std::pair<const char*, DataFormat>>& field_choices(DataFormat*) {
  static const std::vector<std::pair<const char*, DataFormat>> c = {{"bfloat16", DataFormat::Bfloat16},
                                                                      {"bfloat8_b", DataFormat::Bfp8_b},
                                                                      {"bfloat4_b", DataFormat::Bfp4_b},
                                                                      {"float32", DataFormat::Float32}};
  return c;
}

int bfp_magnitude_bits(DataFormat f) {
  if (f == DataFormat::Bfp8_b) return 7;
  if (f == DataFormat::Bfp4_b) return 3;
  return 0;
}

float host_round_bf16(float x) { return round_bf16(x); }

BfpRow host_encode_bfp_row(const float in[16], int mag_bits) {
  BfpRow row;
  uint32_t words[16];
  uint32_t shared = 0;
  for (int j = 0; j < 16; ++j) {
    words[j] = f32_bits(in[j]);
    shared = std::max(shared, (words[j] >> 23) & 255u);
  }
  row.shared_exp = static_cast<uint8_t>(shared);
  const int shift = 24 - mag_bits;
  const uint32_t limit = (1u << mag_bits) - 1;
  for (int j = 0; j < 16; ++j) {
    uint32_t e = (words[j] >> 23) & 255u;
    if (e == 0) continue;  // zero or denormal: code 0, sign dropped
    uint32_t gap = shared - e;
    uint32_t m = (words[j] & 0x7fffffu) | 0x800000u;
    m = gap >= 32 ? 0 : m >> gap;  // bits shifted out do not reach the rounding
    uint32_t odd = (m >> shift) & 1u;
    m = (m + (1u << (shift - 1)) - 1 + odd) >> shift;  // nearest, ties to even
    m = std::min(m, limit);  // a round-up past all-ones saturates, exponent stays
    if (m) row.codes[j] = static_cast<uint8_t>(m | ((words[j] >> 31) << mag_bits));
  }
  return row;
}

void decode_bfp_row(const BfpRow& row, int mag_bits, float out[16]) {
  const uint32_t mag_mask = (1u << mag_bits) - 1;
  const uint32_t top = 1u << (mag_bits - 1);
  for (int j = 0; j < 16; ++j) {
    uint32_t code = row.codes[j];
    uint32_t sign = (code >> mag_bits) & 1u;
    uint32_t m = code & mag_mask;
    if (m == 0) {
      out[j] = f32_from_bits(sign << 31);
      continue;
    }
    int shift = 0;
    while ((m & top) == 0) {
      m <<= 1;
      ++shift;
    }
    int e = static_cast<int>(row.shared_exp) - shift;
    if (e < 0) {  // tt-metal's unpack flushes what would underflow
      out[j] = 0.0f;
      continue;
    }
    uint32_t frac = (m << 1) & mag_mask;  // drop the hidden bit
    uint32_t bits = (sign << 31) | (static_cast<uint32_t>(e) << 23) | (frac << (23 - mag_bits));
    out[j] = f32_from_bits(bits);
  }
}

void unpack_bfp_row_to_src(const BfpRow& row, int mag_bits, float out[16]) {
  const uint32_t mag_mask = (1u << mag_bits) - 1;
  for (int j = 0; j < 16; ++j) {
    const uint32_t code = row.codes[j];
    const uint32_t sign = (code >> mag_bits) & 1u;
    // The magnitude left-aligned in 8 bits (bit 7 = its top bit), as the
    // unpacker widens bfp4 to bfp8 before converting.
    uint32_t mag = ((code & mag_mask) << (8 - mag_bits)) & 0xffu;
    if (mag == 0) {
      out[j] = f32_from_bits(sign ? 0xff800000u : 0u);  // -0 encodes -Inf on the device
      continue;
    }
    uint32_t shift = 0;
    while ((mag & 0x80u) == 0) {
      mag <<= 1;
      ++shift;
    }
    const uint32_t e = (row.shared_exp - shift) & 0xffu;  // wraps
    out[j] = f32_from_bits(((sign << 15) | (e << 7) | (mag & 0x7eu)) << 16);
  }
}

void host_quantize_bfp_row(const float in[16], float out[16], int mag_bits) {
  BfpRow row = host_encode_bfp_row(in, mag_bits);
  decode_bfp_row(row, mag_bits, out);
}

namespace {

// host_round_bf16 on 8 lanes (AVX2, which every mha build requires): NaN ->
// 0xffff, else round to nearest even on the bits.
__m256i round_bf16_8(__m256i u) {
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd);
  return _mm256_and_si256(_mm256_or_si256(r, nan), _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u)));
}

// host_quantize_bfp_row on 8 of a row's lanes whose shared exponent is
// `shared`: encode (the gap shift, ties-to-even rounding to mag_bits,
// saturation; exponent-0 inputs and zero codes give +0) and decode. A code
// m's decoded value is m 2^(shared - 127 - (mag_bits - 1)): m's own float
// (exact, m < 2^8) supplies the normalised significand and its exponent, to
// which the shared exponent is added; a result exponent below 0 flushes to
// +0, one of exactly 0 keeps the denormal bit pattern decode_bfp_row builds.
__m256i quantize_bfp_8(__m256i u, __m256i shared, int mag_bits) {
  const int shift = 24 - mag_bits;
  const __m256i z = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  const __m256i e = _mm256_and_si256(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(255));
  __m256i m = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x800000));
  m = _mm256_srlv_epi32(m, _mm256_sub_epi32(shared, e));  // a gap of 32 or more gives 0
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(m, shift), one);
  m = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(m, _mm256_set1_epi32((1 << (shift - 1)) - 1)), odd), shift);
  m = _mm256_min_epu32(m, _mm256_set1_epi32((1 << mag_bits) - 1));
  const __m256i fm = _mm256_castps_si256(_mm256_cvtepi32_ps(m));
  const __m256i e2 = _mm256_add_epi32(_mm256_srli_epi32(fm, 23), _mm256_sub_epi32(shared, _mm256_set1_epi32(126 + mag_bits)));
  const __m256i bits = _mm256_or_si256(_mm256_add_epi32(fm, _mm256_slli_epi32(_mm256_sub_epi32(e2, _mm256_srli_epi32(fm, 23)), 23)),
                                       _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int32_t>(0x80000000u))));
  const __m256i zero = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi32(e, z), _mm256_cmpeq_epi32(m, z)),
                                       _mm256_cmpgt_epi32(z, e2));
  return _mm256_andnot_si256(zero, bits);
}

void quantize_bfp_rows(const float* in, float* out, int64_t n, int mag_bits) {
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m256i u0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i u1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8));
    const __m256i em = _mm256_set1_epi32(255);
    __m256i mx = _mm256_max_epu32(_mm256_and_si256(_mm256_srli_epi32(u0, 23), em),
                                  _mm256_and_si256(_mm256_srli_epi32(u1, 23), em));
    mx = _mm256_max_epu32(mx, _mm256_permute2x128_si256(mx, mx, 1));
    mx = _mm256_max_epu32(mx, _mm256_shuffle_epi32(mx, 0x4e));
    mx = _mm256_max_epu32(mx, _mm256_shuffle_epi32(mx, 0xb1));  // the row's max in every lane
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), quantize_bfp_8(u0, mx, mag_bits));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8), quantize_bfp_8(u1, mx, mag_bits));
  }
}

}  // namespace

void host_quantize(const float* in, float* out, int64_t n, DataFormat f) {
  switch (f) {
    case DataFormat::Float32:
      if (in != out) std::memmove(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DataFormat::Bfloat16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                            round_bf16_8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
      for (; i < n; ++i) out[i] = host_round_bf16(in[i]);
      return;
    }
    case DataFormat::Bfp8_b:
    case DataFormat::Bfp4_b:
      quantize_bfp_rows(in, out, n, bfp_magnitude_bits(f));
      return;
  }
}

BfpRow pack_bf16_row_to_bfp(const float in[16], int mag_bits) {
  BfpRow row;
  uint32_t h[16];
  uint32_t shared = 0;
  for (int j = 0; j < 16; ++j) {
    h[j] = f32_bits(in[j]) >> 16;
    shared = std::max(shared, (h[j] >> 7) & 255u);  // 255 is just a big exponent here
  }
  row.shared_exp = static_cast<uint8_t>(shared);
  for (int j = 0; j < 16; ++j) {
    uint32_t e = (h[j] >> 7) & 255u;
    uint32_t m = (h[j] & 127u) | (e ? 128u : 0u);
    uint32_t gap = shared - e;
    if (gap >= 8) {
      m = 0;
    } else {
      m = (m + (1u << gap)) >> (gap + 1);  // round half up at the 7-bit boundary
      if (m == 128) m = 127;
    }
    m >>= 7 - mag_bits;  // bfp4 keeps the top 3 of the rounded 7 bits
    if (m) row.codes[j] = static_cast<uint8_t>(m | ((h[j] >> 15) << mag_bits));
  }
  return row;
}

}  // namespace mha::ttsim
