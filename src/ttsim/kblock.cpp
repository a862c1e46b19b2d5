#include "ttsim/kblock.h"

#include <cmath>
#include <cstring>

#include "ttsim/simd/kernels.h"

namespace mha::ttsim {

namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// A bf16 value (top half of `u`) as the L1 accumulator's adder reads it.
double l1_operand(uint32_t h, bool in_l1) {
  const uint32_t sign = h & 0x8000u, mag = h & 0x7fffu;
  if (mag < 0x80u) return sign ? -0.0 : 0.0;  // zero or denormal
  if (mag > 0x7f80u) {                         // NaN: a huge finite value
    const double v = in_l1 ? 1.7976931348623157e308 : std::ldexp(1.0 + (mag & 0x7fu) / 128.0, 128);
    return sign ? -v : v;
  }
  return static_cast<double>(from_bits(h << 16));
}

}  // namespace

float l1_acc_bf16(float l1, float x) {
  const uint32_t d = bits(l1) >> 16, s = bits(x) >> 16;
  if ((d == 0x7f80u && s == 0xff80u) || (d == 0xff80u && s == 0x7f80u)) return from_bits(0x7fc00000u);
  // Two bf16 significands (8 bits) fit a double exactly unless their
  // exponents are more than 45 binades apart, and then the smaller one is far
  // below half an ulp of the result, so rounding the double to bf16 is exact.
  const double sum = l1_operand(d, true) + l1_operand(s, false);
  uint64_t u;
  std::memcpy(&u, &sum, 8);
  const uint32_t sign = static_cast<uint32_t>(u >> 63) << 15;
  const int64_t e = static_cast<int64_t>((u >> 52) & 0x7ff) - 1023 + 127;
  if (e <= 0) return from_bits(sign << 16);
  if (e >= 255) return from_bits((sign | 0x7f80u) << 16);
  const uint64_t m = u & ((1ull << 52) - 1);
  const int drop = 52 - 7;
  const uint64_t half = 1ull << (drop - 1), rest = m & ((1ull << drop) - 1);
  uint64_t q = m >> drop;
  if (rest > half || (rest == half && (q & 1))) ++q;  // ties to even; may carry into the exponent
  const uint32_t h = sign | static_cast<uint32_t>((static_cast<uint64_t>(e) << 7) + q);
  return from_bits(h << 16);
}

float l1_acc_fp32(float l1, float x) {
  auto daz = [](uint32_t u) { return (u & 0x7fffffffu) < 0x00800000u ? u & 0x80000000u : u; };
  const float sum = from_bits(daz(bits(l1))) + from_bits(daz(bits(x)));
  const uint32_t r = bits(sum);
  if ((r & 0x7fffffffu) > 0x7f800000u) return from_bits(0x7fc00000u);
  return from_bits(daz(r));
}

void l1_acc_fp32(float* l1, const float* x, int64_t n) {
  // Eight at a time in the vector layer (simd/host_kernels.inc), the same bits.
  simd::host_kernels().l1_acc_fp32(l1, x, n);
  for (int64_t i = n - n % 8; i < n; ++i) l1[i] = l1_acc_fp32(l1[i], x[i]);
}

}  // namespace mha::ttsim
