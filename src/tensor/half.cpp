#include "tensor/half.h"

namespace mha {

float f32_from_f16(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // Subnormal half: normalise into a float.
    int e = -1;
    do { man <<= 1; ++e; } while ((man & 0x400u) == 0);
    man &= 0x3ffu;
    return f32_from_bits(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man << 13));
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f16_from_f32(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to Inf
  int exp = static_cast<int>(absu >> 23) - 127;
  if (exp < -14) {
    // Subnormal or zero half: shift the full mantissa, round to nearest even.
    if (exp < -25) return sign;
    uint32_t man = (absu & 0x7fffffu) | 0x800000u;
    int shift = -exp - 14 + 13;
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t man = absu & 0x7fffffu;
  uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace mha
