#pragma once
// Tensix data formats: host conversions (what ttnn.from_torch / to_torch do)
// and packer conversions (what a device op writes when it packs Dst to L1).
//
// Values are carried as float everywhere: every format here decodes to a
// float exactly, so a "bfloat8_b tensor" is a float array whose every 16-value
// face row shares one exponent. See docs/TTSIM.md for the rules and sources.
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace mha::ttsim {

enum class DataFormat { Float32, Bfloat16, Bfp8_b, Bfp4_b };

const char* format_name(DataFormat f);
// Parses TT-NN's names ("float32", "bfloat16", "bfloat8_b", "bfloat4_b");
// throws InputError naming the bad value.
DataFormat format_from_name(const std::string& name);
// {name, format} for every format, in TT-NN's names (util/fields.h).
const std::vector<std::pair<const char*, DataFormat>>& field_choices(DataFormat*);

// Magnitude bits of one block-float element, hidden bit included (7 or 3);
// 0 for the non-block formats.
int bfp_magnitude_bits(DataFormat f);

// --- host side (tt-metal's CPU conversion code) -----------------------------

// float32 -> bfloat16 with round to nearest even (torch's .to(bfloat16)).
float host_round_bf16(float x);

// One 16-element face row encoded as block float.
struct BfpRow {
  uint8_t shared_exp = 0;  // raw 8-bit exponent field, max over the row
  uint8_t codes[16] = {};  // sign bit above mag_bits magnitude bits
};

// Host float32 -> bfp row: shared exponent = max raw exponent (Inf/NaN count
// as 255); each significand (hidden bit set) is shifted right by the exponent
// gap (shifted-out bits are lost), then rounded to mag_bits bits, ties to
// even, saturating at all-ones; exponent-0 inputs (zeros, denormals) give 0;
// a zero magnitude never keeps its sign.
BfpRow host_encode_bfp_row(const float in[16], int mag_bits);
// bfp row -> float32 (tt-metal's unpack: normalise the magnitude, subtract the
// shift from the shared exponent, flush to zero if that would underflow).
void decode_bfp_row(const BfpRow& row, int mag_bits, float out[16]);
// bfp row -> what the device's unpacker writes to SrcA/SrcB (ttsim
// src/tensix.cpp bfp8_to_bf16): the same normalisation, but the exponent
// shared - shift is kept modulo 256 (it WRAPS instead of flushing), and a
// zero magnitude with the sign bit reads as -Inf. Values are bf16-exact.
// For every row host_encode_bfp_row or the packer writes, shared - shift is
// the element's own exponent (>= 1), so this equals decode_bfp_row there
// (tested); it differs only on rows no tt-metal encoder produces.
void unpack_bfp_row_to_src(const BfpRow& row, int mag_bits, float out[16]);
// Convenience: in -> encode -> decode (in and out may alias).
void host_quantize_bfp_row(const float in[16], float out[16], int mag_bits);

// Quantises n values that are already laid out as whole 16-value face rows.
// For Float32 this is a copy.
void host_quantize(const float* in, float* out, int64_t n, DataFormat f);

// --- device side (packer: Dst -> L1) -----------------------------------------

// Dst FP32 value -> bf16 as the packer rounds it: NaN becomes Inf of the same
// sign, then round half away from zero (add 0x8000 to the magnitude bits),
// then exponent-0 results flush to +0.
// (Inline: the packer runs once per output element.)
inline float pack_fp32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0x80000000u) | 0x7f800000u;
  uint32_t h = (u + 0x8000u) >> 16;  // carries into the exponent and on to Inf
  if ((h & 0x7fffu) < 0x80u) h = 0;
  h <<= 16;
  std::memcpy(&x, &h, 4);
  return x;
}
// Dst BF16 value -> bf16 output: NaN -> Inf, denormal -> +0, else unchanged.
inline float pack_bf16_passthrough(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t h = u >> 16;
  if ((h & 0x7fffu) > 0x7f80u) h = (h & 0x8000u) | 0x7f80u;
  else if ((h & 0x7fffu) < 0x80u) h = 0;
  h <<= 16;
  std::memcpy(&x, &h, 4);
  return x;
}
// A face row of bf16 values -> block float as the packer does it: shared
// exponent = max; 8-bit significand (hidden+7) shifted right by the gap with
// round half up (in magnitude) to 7 bits, saturating at 127; for bfp4 the
// 7-bit magnitude is then truncated to 3 bits.
BfpRow pack_bf16_row_to_bfp(const float in[16], int mag_bits);

}  // namespace mha::ttsim
