#include "init/box_muller16.h"

#include <cmath>
#include <cstring>

namespace mha::detail {
namespace {

// torch declares these as float arrays initialised from double literals, so
// each constant is the double value rounded to float (not the decimal
// rounded straight to float).
constexpr float f(double v) { return static_cast<float>(v); }

uint32_t bits_of(float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; }
float from_bits(uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; }

// Cephes logf as torch's log256_ps evaluates it, for x in (0, 1].
float cephes_log(float x) {
  const float min_normal = from_bits(0x00800000u);
  if (x < min_normal) x = min_normal;
  const uint32_t u = bits_of(x);
  float e = static_cast<float>(static_cast<int32_t>(u >> 23) - 0x7f) + 1.0f;
  float m = from_bits((u & ~0x7f800000u) | bits_of(0.5f));  // mantissa in [0.5, 1)
  // Below sqrt(1/2) the mantissa is doubled so the polynomial argument stays
  // in [sqrt(1/2) - 1, sqrt(2) - 1]; torch adds a masked copy of m, i.e. m or +0.
  const bool small = m < f(0.707106781186547524);
  const float masked = small ? m : 0.0f;
  e = e - (small ? 1.0f : 0.0f);
  x = (m - 1.0f) + masked;

  const float z = x * x;
  float y = f(7.0376836292E-2);
  const double p[] = {-1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                      -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1};
  for (double c : p) y = std::fmaf(y, x, f(c));
  y = y * x;
  y = std::fmaf(y, z, e * f(-2.12194440e-4));
  y = std::fmaf(-z, 0.5f, y);
  x = x + y;
  return std::fmaf(e, f(0.693359375), x);
}

// Cephes sincosf as torch's sincos256_ps evaluates it, for x >= 0 (the
// Box-Muller angle is 2*pi*u with u in [0, 1)).
void cephes_sincos(float x, float* s, float* c) {
  int32_t j = static_cast<int32_t>(x * f(1.27323954473516));  // truncation, as cvttps
  j = (j + 1) & ~1;
  const float yj = static_cast<float>(j);
  const bool flip_sin = (j & 4) != 0;
  const bool sin_poly = (j & 2) == 0;  // sine from the sine polynomial
  const bool flip_cos = (~(j - 2) & 4) != 0;

  // Three-part pi/4 so the reduction stays exact.
  x = std::fmaf(yj, f(-0.78515625), x);
  x = std::fmaf(yj, f(-2.4187564849853515625e-4), x);
  x = std::fmaf(yj, f(-3.77489497744594108e-8), x);
  const float z = x * x;

  float yc = std::fmaf(f(2.443315711809948E-005), z, f(-1.388731625493765E-003));
  yc = std::fmaf(yc, z, f(4.166664568298827E-002));
  yc = yc * z;
  yc = std::fmaf(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;

  float ys = std::fmaf(f(-1.9515295891E-4), z, f(8.3321608736E-3));
  ys = std::fmaf(ys, z, f(-1.6666654611E-1));
  ys = ys * z;
  ys = std::fmaf(ys, x, x);

  // torch selects with bit masks and then adds and subtracts the masked
  // halves; the +0.0f terms keep those float operations (and their effect
  // on signed zeros) identical.
  const float sin2 = sin_poly ? ys : 0.0f;
  const float sin1 = sin_poly ? 0.0f : yc;
  float sv = sin1 + sin2;
  float cv = (yc - sin1) + (ys - sin2);
  if (flip_sin) sv = -sv;
  if (flip_cos) cv = -cv;
  *s = sv;
  *c = cv;
}

}  // namespace

void box_muller16(float* data, float mean, float std) {
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  for (int j = 0; j < 8; ++j) {
    const float radius = std::sqrt(-2.0f * cephes_log(1.0f - data[j]));
    float s, c;
    cephes_sincos(two_pi * data[j + 8], &s, &c);
    data[j] = std::fmaf(radius * c, std, mean);
    data[j + 8] = std::fmaf(radius * s, std, mean);
  }
}

}  // namespace mha::detail
