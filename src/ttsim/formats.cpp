#include "ttsim/formats.h"

#include <algorithm>
#include <cstring>

#include "tensor/half.h"
#include "ttsim/simd/kernels.h"
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

void host_quantize(const float* in, float* out, int64_t n, DataFormat f) {
  switch (f) {
    case DataFormat::Float32:
      if (in != out) std::memmove(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DataFormat::Bfloat16:
      // Eight at a time in the vector layer (simd/host_kernels.inc), the same bits.
      simd::host_kernels().round_bf16(in, out, n);
      for (int64_t i = n - n % 8; i < n; ++i) out[i] = host_round_bf16(in[i]);
      return;
    case DataFormat::Bfp8_b:
    case DataFormat::Bfp4_b:
      simd::host_kernels().quantize_bfp(in, out, n, bfp_magnitude_bits(f));
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
