#include "ttsim/packer.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/half.h"
#include "ttsim/simd/kernels.h"

namespace mha::ttsim {

const char* pack_src_name(PackSrc s) {
  switch (s) {
    case PackSrc::Float32: return "Float32";
    case PackSrc::Bfloat16: return "Float16_b";
    case PackSrc::Bfp8_b: return "Bfp8_b";
  }
  return "?";
}

PackSrc pack_src_format(DataFormat out, bool fp32_dest, bool bfp8_pack_precise) {
  switch (out) {
    case DataFormat::Float32: return fp32_dest ? PackSrc::Float32 : PackSrc::Bfloat16;
    case DataFormat::Bfloat16: return PackSrc::Bfloat16;
    case DataFormat::Bfp8_b:
    case DataFormat::Bfp4_b:
      if (!bfp8_pack_precise) return PackSrc::Bfp8_b;
      return fp32_dest ? PackSrc::Float32 : PackSrc::Bfloat16;
  }
  return PackSrc::Bfloat16;
}

bool pack_mode_supported(DataFormat out, bool fp32_dest, PackSrc src) {
  const bool bfp = bfp_magnitude_bits(out) > 0;
  if (!fp32_dest) return src != PackSrc::Float32;  // 0x50/55/56/57, 0x60/65/66/67
  switch (src) {
    case PackSrc::Float32: return out != DataFormat::Bfloat16;  // 0x100, 0x106, 0x107
    case PackSrc::Bfloat16: return out == DataFormat::Bfloat16;  // 0x155
    case PackSrc::Bfp8_b: return bfp;                            // 0x166, 0x167
  }
  return false;
}

namespace {

// 16-bit stage helpers on the top half of a float (sign, 8-bit exponent, 7
// mantissa bits).
inline uint32_t nan_to_inf16(uint32_t h) { return (h & 0x7fffu) > 0x7f80u ? (h & 0x8000u) | 0x7f80u : h; }
inline uint32_t flush16(uint32_t h) { return (h & 0x7fffu) < 0x80u ? 0u : h; }
// Round half up (in magnitude) to 6 mantissa bits; an all-ones mantissa
// carries into the exponent (and 0x7f7f on to Inf).
inline uint32_t to_m6(uint32_t h) { return (h + 1u) & ~1u; }
inline float from16(uint32_t h) { return f32_from_bits(h << 16); }

}  // namespace

float pack_dst_value(float dst, DataFormat out, bool fp32_dest, PackSrc src) {
  const uint32_t u = f32_bits(dst);
  if (fp32_dest) {
    switch (src) {
      case PackSrc::Bfloat16: return pack_fp32_to_bf16(dst);
      case PackSrc::Bfp8_b: {
        uint32_t v = (u & 0x7fffffffu) > 0x7f800000u ? (u & 0x80000000u) | 0x7f800000u : u;
        return from16(flush16(to_m6(v >> 16)));
      }
      case PackSrc::Float32:
        if (bfp_magnitude_bits(out) == 0) return dst;
        return from16(flush16(u >> 16));  // late conversion: truncation, NaN not touched
    }
  }
  const uint32_t h = flush16(nan_to_inf16(u >> 16));
  return from16(src == PackSrc::Bfp8_b ? to_m6(h) : h);
}

void pack_dst(const float* dst, float* out, int64_t n, DataFormat out_format, bool fp32_dest, PackSrc src) {
  if (!pack_mode_supported(out_format, fp32_dest, src))
    throw std::logic_error(std::string("tt-sim packer: no mode for ") + (fp32_dest ? "fp32" : "16-bit") +
                           " Dst, pack source " + pack_src_name(src) + ", output " + format_name(out_format));
  const int bits = bfp_magnitude_bits(out_format);
  if (src == PackSrc::Float32 && bits == 0) {  // the fp32 value itself
    if (out != dst) std::memmove(out, dst, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  // The Bfloat16 source (every SDPA step, bf16 matmul outputs) eight at a
  // time in the vector layer (simd/host_kernels.inc), the same bits.
  const int64_t done = src == PackSrc::Bfloat16 ? simd::host_kernels().pack_bf16(dst, out, n, fp32_dest) : 0;
  for (int64_t i = done; i < n; ++i) out[i] = pack_dst_value(dst[i], out_format, fp32_dest, src);
  if (bits == 0) return;
  // The block builder works on the 16-bit stage whatever the source was.
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const BfpRow row = pack_bf16_row_to_bfp(out + i, bits);
    decode_bfp_row(row, bits, out + i);
  }
}

}  // namespace mha::ttsim
