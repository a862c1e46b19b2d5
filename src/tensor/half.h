#pragma once
// IEEE half and bfloat16 conversions, bit exact.
#include <cstdint>
#include <cstring>

namespace mha {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// float -> bfloat16 as torch converts a float32 tensor (`t.to(torch.bfloat16)`,
// which ttnn.from_torch also calls): round to nearest even, and every NaN,
// whatever its sign and payload, becomes 0xFFFF. That is torch's vectorized
// CPU conversion (ATen vec256/vec512 `cvtfp32_bf16`: a NaN lane is blended
// with 0xffff), measured with torch 1.13 here; c10::BFloat16's scalar
// constructor and tt-metal's `bfloat16` class write 0x7FC0 instead, and CPUs
// with AVX512-BF16 keep the NaN's sign (docs/TTSIM.md, "Formats").
inline uint16_t bf16_from_f32(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float f32_from_bf16(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
// Rounds a float to the nearest bfloat16 value, kept as float.
inline float round_bf16(float f) { return f32_from_bf16(bf16_from_f32(f)); }

float f32_from_f16(uint16_t h);
uint16_t f16_from_f32(float f);  // round to nearest even, overflow to Inf

}  // namespace mha
