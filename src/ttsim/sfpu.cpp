// SFPU exp / reciprocal. Algorithms learned from tt-llk
// tt_llk_wormhole_b0/common/inc/sfpu/ckernel_sfpu_exp.h and
// ckernel_sfpu_recip.h, tt-metal's metal/llk_api/llk_sfpu/ckernel_sfpu_exp.h
// and the softmax compute kernel, and tt-llk's tt_llk_blackhole
// ckernel_sfpu_recip.h (547864af) for Blackhole's reciprocal; written
// independently. Every SFPU multiply and add (SFPMAD, SFPMUL, SFPADD,
// SFPMULI) goes through the multiply-add model of the lane's generation
// (sfpu_mad.h); constants are folded in FP32 on the host
// as the kernels' constexpr do; integer and bit-field steps are exact.
#include "ttsim/sfpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "ttsim/sfpu_mad.h"

namespace mha::ttsim {

ExpAlgorithm exp_algorithm(bool math_approx_mode, bool fp32_dest_acc_en) {
  if (math_approx_mode) return ExpAlgorithm::FastApprox;
  return fp32_dest_acc_en ? ExpAlgorithm::AccurateFp32 : ExpAlgorithm::Accurate21f;
}

float sfpu_store(float v, bool fp32_dest) {
  // Written as a mask select: GCC 12.2 -O2 folds the equivalent
  // `fp32_dest ? v : f32_from_bits(f32_bits(v) & mask)` to `v`.
  uint32_t mask = fp32_dest ? 0xffffffffu : 0xffff0000u;
  return f32_from_bits(f32_bits(v) & mask);
}

float sfpu_round_bf16(float v) {
  uint32_t u = f32_bits(v);
  uint32_t e = (u >> 23) & 255u;
  if (e == 0) return 0.0f;
  if (e == 255) return f32_from_bits(u & 0xff800000u);
  uint32_t low = u & 0xffffu;
  u -= low;
  if (low >= 0x8000u) u += 0x10000u;
  return f32_from_bits(u);
}

namespace {

// SFP_STOCH_RND FP32 -> unsigned int16: half away from zero, negatives to 0,
// saturating at 65535.
uint32_t sfpu_to_uint16(float v) {
  if (!(v > 0.0f)) return 0;
  if (v >= 65535.0f) return 65535;
  return static_cast<uint32_t>(std::floor(static_cast<double>(v) + 0.5));
}

// Schraudolph: the bit pattern of 2^y is linear in y. The input is clamped at
// -88.5 first, computed as A*x + (B - C) with A = 256/ln2, rounded to a
// 16-bit integer and shifted into the exponent and top mantissa bits.
float exp_fast_approx(float x, Arch arch) {
  const float A = 256.0f * 1.4426950408889634f;
  const float b_minus_c = 32500.818359375f;
  float y = std::isnan(x) ? x : std::max(x, -88.5f);
  uint32_t i = sfpu_to_uint16(sfpu_mad(A, y, b_minus_c, arch));  // SFPMAD
  return f32_from_bits(i << 15);
}

// 2^(x/ln2) with the fractional part used linearly as the mantissa: x/ln2 +
// 192 places the integer part in a fixed exponent, an integer add rebiases
// it, and a shift moves it into the exponent field. Saturates outside
// [-42, 89).
float exp_approx(float x, Arch arch) {
  if (x >= 89.0f) return std::numeric_limits<float>::infinity();
  if (x < -42.0f) return 0.0f;
  float t = sfpu_mad(x, 1.442695f, 192.0f, arch);  // SFPMAD; 192 = bf16 0x4340 (p_exp::C23_73)
  uint32_t s = f32_bits(t) + 0xbd3f0000u;  // drop the fixed exponent, add the 127 bias
  return f32_from_bits(s << 7);
}

// exp_21f (Moroz et al. 2022): z = x/ln2 + 127 clamped to [0, 255], its
// fixed-point value split into exponent (integer part) and fraction, the
// fraction refined by a degree-2 polynomial. Rounded to bf16 for 16-bit Dst.
float exp_21f(float x, bool fp32_dest, Arch arch) {
  float z = sfpu_mad(x, 1.4426950216293334961f, 127.0f, arch);
  if (std::isnan(z)) z = 0.0f;
  z = std::min(std::max(z, 0.0f), 255.0f);
  uint32_t fixed;  // z * 2^23 as an integer, bits below the point truncated
  {
    int e = static_cast<int>((f32_bits(z) >> 23) & 255u) - 127;
    uint32_t man = (f32_bits(z) & 0x7fffffu) | 0x800000u;
    if (z == 0.0f) fixed = 0;
    else fixed = e >= 0 ? man << e : (e > -32 ? man >> -e : 0);
  }
  uint32_t exp_part = (fixed >> 23) & 255u;
  float frac = static_cast<float>(fixed & 0x7fffffu);
  // PolynomialEvaluator: Horner, one SFPMAD per coefficient.
  frac = sfpu_mad(sfpu_mad(frac, 4.791750143340323e-15f, 7.839635491371155e-08f, arch), frac, 1.0017248f, arch);
  if (exp_part >= 255) return std::numeric_limits<float>::infinity();
  float y = f32_from_bits((f32_bits(frac) & 0x807fffffu) | (exp_part << 23));
  if (fp32_dest) return y;
  return sfpu_round_bf16(y);
}

// Cody-Waite: k = round(x/ln2) (ties to even), r = x - k*ln2 in two parts,
// exp(r) by a degree-7 Taylor polynomial, then k added to the exponent.
float exp_fp32_accurate(float x, Arch arch) {
  float z = sfpu_mul(x, 1.4426950408889634f, arch);
  if (std::isnan(z)) return std::numeric_limits<float>::quiet_NaN();
  if (z >= 128.0f) return std::numeric_limits<float>::infinity();
  if (z <= -127.0f) return 0.0f;
  const float c231 = f32_from_bits(0x4b400000u);
  float tmp = sfpu_add(z, c231, arch);
  float k = sfpu_add(tmp, -c231, arch);
  int32_t k_int = static_cast<int32_t>(f32_bits(tmp) - f32_bits(c231));
  float r = sfpu_mad(k, -0.6931152343750000f, x, arch);
  r = sfpu_mad(k, -3.19461832987e-05f, r, arch);
  const float c[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6.0f, 1.0f / 24.0f, 1.0f / 120.0f, 1.0f / 720.0f, 1.0f / 5040.0f};
  float p = c[7];
  for (int i = 6; i >= 0; --i) p = sfpu_mad(p, r, c[i], arch);
  int32_t e = static_cast<int32_t>((f32_bits(p) >> 23) & 255u) + k_int;
  return f32_from_bits((f32_bits(p) & 0x807fffffu) | ((static_cast<uint32_t>(e) & 255u) << 23));
}

}  // namespace

float sfpu_exp_lane(float x, ExpAlgorithm algo, Arch arch) {
  switch (algo) {
    case ExpAlgorithm::FastApprox: return exp_fast_approx(x, arch);
    case ExpAlgorithm::Approx: return exp_approx(x, arch);
    case ExpAlgorithm::Accurate21f: return exp_21f(x, false, arch);
    case ExpAlgorithm::AccurateFp32: return exp_fp32_accurate(x, arch);
  }
  return 0.0f;
}

float sfpu_exp_fast_approx_scaled(float x, float scale, Arch arch) {
  const float a_scaled = 256.0f * 1.4426950408889634f * scale;  // constexpr on the host, fp32
  const float threshold = -88.5f / scale;
  const float y = std::isnan(x) ? x : std::max(x, threshold);  // the SWAP against LREG14
  return f32_from_bits(sfpu_to_uint16(sfpu_mad(a_scaled, y, 32500.818359375f, arch)) << 15);
}

void sfpu_exp_fast_approx_scaled(const float* x, int64_t n, float scale, const simd::KernelTable* kern, Arch arch,
                                 float* out) {
  const float a_scaled = 256.0f * 1.4426950408889634f * scale, threshold = -88.5f / scale;
  bool lanes_ok = kern != nullptr && n % 32 == 0 && std::isfinite(a_scaled);
  thread_local std::vector<uint32_t> y, a, c, r;  // reused: one call per score row
  y.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n && lanes_ok; ++i) {
    const float v = std::max(x[i], threshold);
    // mad_finite's domain: finite operands, a product well inside FP32.
    lanes_ok = std::isfinite(v) && std::fabs(static_cast<double>(a_scaled) * v) < 1e37;
    y[static_cast<size_t>(i)] = f32_bits(v);
  }
  if (!lanes_ok) {
    for (int64_t i = 0; i < n; ++i) out[i] = sfpu_exp_fast_approx_scaled(x[i], scale, arch);
    return;
  }
  a.assign(static_cast<size_t>(n), f32_bits(a_scaled));
  c.assign(a.size(), f32_bits(32500.818359375f));
  r.resize(a.size());
  kern->mad_finite(a.data(), y.data(), c.data(), n, r.data());
  for (int64_t i = 0; i < n; ++i) out[i] = f32_from_bits(sfpu_to_uint16(f32_from_bits(r[static_cast<size_t>(i)])) << 15);
}

float sfpu_exp(float x, bool math_approx_mode, bool fp32_dest, Arch arch) {
  return sfpu_store(sfpu_exp_lane(x, exp_algorithm(math_approx_mode, fp32_dest), arch), fp32_dest);
}

namespace {

// SFPARECIP's table: for the significands m in [1 + i/128, 1 + (i+1)/128),
// the 7 fraction bits of 2/m (in (1, 2]) at the interval's midpoint
// m = (257 + 2i)/256, rounded to nearest: 128 (2/m - 1) = 128 (255 - 2i) /
// (257 + 2i). (ttsim lists the 128 values; this is the rule they follow.)
struct ArecipTable {
  uint8_t v[128];
  ArecipTable() {
    for (uint32_t i = 0; i < 128; ++i) {
      const uint32_t num = 128 * (255 - 2 * i), den = 257 + 2 * i;
      v[i] = static_cast<uint8_t>((2 * num + den) / (2 * den));
    }
  }
};

// Blackhole's recip_tile: SFPARECIP, then Newton steps on the negated
// residual t = x y - 2 (SFPMAD with c negated). `t < 0` is SFPSETCC's
// sign-bit test, which the canonical NaN (positive) of 0 * Inf fails, so 0
// and Inf keep their estimates (Inf and 0); y * -t - 0 keeps the sign of a
// zero product. The second step runs only under the first's test.
float reciprocal_blackhole(float x, int newton_iters) {
  const Arch bh = Arch::Blackhole;
  float y = f32_from_bits(sfpu_arecip_bits(f32_bits(x)));
  if (newton_iters <= 0) return y;
  float t = sfpu_mad(x, y, -2.0f, bh);
  if ((f32_bits(t) >> 31) == 0) return y;
  const float y1 = sfpu_mad(y, -t, -0.0f, bh);
  if (newton_iters == 1) return y1;
  t = sfpu_mad(x, y1, -2.0f, bh);
  return sfpu_mad(y1, -t, -0.0f, bh);
}

}  // namespace

uint32_t sfpu_arecip_bits(uint32_t x) {
  static const ArecipTable table;
  const uint32_t sign = x & 0x80000000u, mag = x & 0x7fffffffu;
  if (mag < 0x00800000u) return sign | 0x7f800000u;  // zero or denormal: Inf
  if (mag >= 0x7e800000u) return sign;                 // 2^126 and above, Inf, NaN: 0
  return sign | ((253u - (mag >> 23)) << 23) | (static_cast<uint32_t>(table.v[(mag >> 16) & 127u]) << 16);
}

float sfpu_reciprocal_lane(float x, int newton_iters, Arch arch) {
  if (arch == Arch::Blackhole) return reciprocal_blackhole(x, newton_iters);
  // Significand of x as -m with m in [1, 2); the scale 2^(254 - exp) is built
  // from the complemented exponent, so 0 -> Inf and Inf -> 0 fall out.
  uint32_t u = f32_bits(x);
  float neg_m = f32_from_bits(0xbf800000u | (u & 0x7fffffu));
  float y = sfpu_mad(0.3232325017452239990234375f, neg_m, 1.4545459747314453125f);
  y = sfpu_mad(y, neg_m, 2.121212482452392578125f);
  // ~in with the mantissa cleared (sign included; setsgn below overrides it).
  float scale = sfpu_mul(f32_from_bits((~u) & 0xff800000u), 0.5f);
  for (int i = 0; i < std::max(newton_iters, 1); ++i) {
    float t = sfpu_mad(neg_m, y, 1.0f);
    y = sfpu_mad(y, t, y);
  }
  y = sfpu_mul(y, scale);
  return f32_from_bits((f32_bits(y) & 0x7fffffffu) | (u & 0x80000000u));
}

float sfpu_reciprocal(float x, bool math_approx_mode, bool fp32_dest, Arch arch) {
  float y;
  if (math_approx_mode) y = sfpu_reciprocal_lane(x, 0, arch);
  else if (fp32_dest) y = sfpu_reciprocal_lane(x, 2, arch);
  else y = sfpu_round_bf16(sfpu_reciprocal_lane(x, 1, arch));
  return sfpu_store(y, fp32_dest);
}

float sfpu_reciprocal_legacy(float x, bool math_approx_mode, bool fp32_dest, Arch arch) {
  const uint32_t u = f32_bits(x);
  const float neg_m = f32_from_bits(0x80000000u | (126u << 23) | (u & 0x7fffffu));
  const float ln2_recip = 1.442695f;
  float r = sfpu_mul(ln2_recip, sfpu_mad(neg_m, ln2_recip, 2.0f, arch), arch);
  for (int i = 0; i < (math_approx_mode ? 1 : 2); ++i) r = sfpu_mul(r, sfpu_mad(neg_m, r, 2.0f, arch), arch);
  // setexp keeps the low 8 bits of the rebuilt exponent; below 0 gives 0.
  const int exp_x = static_cast<int>((u >> 23) & 255u) - 127, exp_r = static_cast<int>((f32_bits(r) >> 23) & 255u) - 127;
  const int e = exp_r - exp_x + 126;
  r = e < 0 ? 0.0f : f32_from_bits((f32_bits(r) & 0x807fffffu) | ((static_cast<uint32_t>(e) & 255u) << 23));
  if (x < 0.0f) r = -r;
  if (!math_approx_mode && !fp32_dest) r = sfpu_round_bf16(r);
  return sfpu_store(r, fp32_dest);
}

}  // namespace mha::ttsim
