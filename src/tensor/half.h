#pragma once
// IEEE half and bfloat16 conversions, bit exact.
#include <cstdint>
#include <cstring>

namespace mha {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// float -> bfloat16 with round to nearest even; NaN stays a quiet NaN.
inline uint16_t bf16_from_f32(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float f32_from_bf16(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
// Rounds a float to the nearest bfloat16 value, kept as float.
inline float round_bf16(float f) { return f32_from_bf16(bf16_from_f32(f)); }

float f32_from_f16(uint16_t h);
uint16_t f16_from_f32(float f);  // round to nearest even, overflow to Inf

}  // namespace mha
