// Wormhole and Blackhole SFPMAD. Rules learned from Tenstorrent's ttsim
// (src/fma.cpp, fma_model_wh and fma_model_bh, v1.10.0) and written
// independently; docs/TTSIM.md states
// them. Fixed-point frame: a significand m with exponent field e stands for
// m * 2^(e - 127 - 26), i.e. 1.0 is 2^26 (23 fraction bits + 3 extra bits).
#include "ttsim/sfpu_mad.h"

#include "tensor/half.h"

namespace mha::ttsim {

namespace {

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kInf = 0x7f800000u;
constexpr uint32_t kHidden = 0x800000u;
constexpr uint32_t kCanonicalNaN = 0x7fc00000u;

struct Operand {
  uint32_t sign;
  int32_t exp;   // biased exponent field
  uint32_t sig;  // 24-bit significand with the hidden bit; 0 when exp == 0
  bool special() const { return exp == 255; }
  bool inf() const { return exp == 255 && sig == kHidden; }
  bool nan() const { return exp == 255 && sig != kHidden; }
};

Operand unpack(uint32_t v) {
  Operand o;
  o.sign = v & kSign;
  o.exp = static_cast<int32_t>((v >> 23) & 255u);
  o.sig = o.exp == 0 ? 0u : ((v & 0x7fffffu) | kHidden);
  return o;
}

// v / 2^s truncated, with the lost bits OR-ed into bit 0 only when the
// truncated value is not already 0 (a value shifted out entirely leaves no
// sticky bit).
uint32_t align(uint32_t v, int32_t s) {
  if (s >= 32) return 0;
  const uint32_t kept = v >> s;
  if (kept == 0) return 0;
  return kept | ((kept << s) != v ? 1u : 0u);
}

// The product of the two 24-bit significands (48 bits, 1.0 * 1.0 = 2^46)
// brought to the 2^26 frame by dropping 20 bits into a sticky bit; its
// exponent field is ea + eb - 127. Both generations form it so.
struct Product {
  uint32_t sign, m;
  int32_t e;
};

Product multiply(const Operand& x, const Operand& y) {
  const uint64_t full = static_cast<uint64_t>(x.sig) * y.sig;
  return {x.sign ^ y.sign, static_cast<uint32_t>(full >> 20) | ((full & 0xfffffu) != 0 ? 1u : 0u),
          x.exp + y.exp - 127};
}

// Shapes: three scalars.
uint32_t mad_bits_wormhole(uint32_t a, uint32_t b, uint32_t c) {
  const Operand x = unpack(a), y = unpack(b), z = unpack(c);
  const Product p = multiply(x, y);
  const uint32_t psign = p.sign;
  uint32_t pm = p.m;
  int32_t pe = p.e;
  uint32_t zm = z.sig << 3;
  const int32_t ze = z.exp;

  // Inf/NaN operands or a product past the largest exponent. A NaN result
  // is not returned at once: the add below still runs and its bits can
  // land in the NaN's payload.
  uint32_t nan = 0;
  if (x.special() || y.special() || z.special() || pe >= 255) {
    const bool product_huge = x.special() || y.special() || pe >= 255;
    const bool inf_times_zero = (x.special() && y.sig == 0) || (y.special() && x.sig == 0);
    if (x.nan() || y.nan() || inf_times_zero || (z.inf() && product_huge && z.sign != psign)) {
      nan = psign | kInf | 1u;
    } else if (z.nan()) {
      nan = z.sign | kInf | 1u;
    } else if (z.inf()) {
      return c;
    } else {
      return psign | kInf;
    }
    if (pe > 255) pe = 255;
  }

  // A zero product, or one below the smallest exponent, does not take part.
  if (pm == 0 || pe < 0) {
    if (nan == 0) return zm != 0 ? c : 0u;
    pm = 0;
    pe = 0;
  }

  // Align both terms to the larger exponent and add the magnitudes (or
  // subtract the smaller from the larger).
  int32_t re = pe > ze ? pe : ze;
  pm = align(pm, re - pe);
  zm = align(zm, re - ze);
  const uint32_t rsign = pm >= zm ? psign : z.sign;
  uint32_t rm;
  if (psign == z.sign) rm = pm + zm;
  else rm = pm >= zm ? pm - zm : zm - pm;
  if (rm == 0) return nan;  // exact cancellation: +0

  // Normalise to the leading one at bit 26. A sum that carried shifts right
  // keeping only its own bit 0 as the sticky bit.
  const int32_t n = (31 - __builtin_clz(rm)) - 26;
  re += n;
  if (re >= 255) return nan != 0 ? nan : (rsign | kInf);
  if (re < 0) return nan;
  if (n < 0) rm <<= -n;
  else if (n > 0) rm = (rm >> n) | (rm & 1u);

  // Round to nearest even on the three extra bits (a carry may reach the
  // exponent); exponent field 0 afterwards is flushed to +0.
  uint32_t r = (static_cast<uint32_t>(re) << 23) + ((rm >> 3) & 0x7fffffu);
  if ((rm & 7u) + (r & 1u) > 4u) ++r;
  if ((r >> 23) == 0) return nan;
  return (nan != 0 ? nan : rsign) | r;
}

// Blackhole: Inf/NaN decided up front, zeros signed, full sticky bits and
// rounding below the normal range (sfpu_mad.h).
uint32_t mad_bits_blackhole(uint32_t a, uint32_t b, uint32_t c) {
  const Operand x = unpack(a), y = unpack(b), z = unpack(c);
  const Product p = multiply(x, y);
  uint32_t pm = p.m;
  if (x.special() || y.special() || z.special() || p.e >= 255) {
    const bool inf_times_zero = (x.special() && y.sig == 0) || (y.special() && x.sig == 0);
    // Only an Inf operand (not a finite product that overflows) meets an
    // opposite Inf c as NaN.
    const bool inf_minus_inf = z.inf() && (x.special() || y.special()) && z.sign != p.sign;
    if (x.nan() || y.nan() || z.nan() || inf_times_zero || inf_minus_inf) return kCanonicalNaN;
    return z.inf() ? c : (p.sign | kInf);
  }
  uint32_t zm = z.sig << 3;
  // An unused product leaves c, or a zero signed as both c and the product.
  if (pm == 0 || p.e < 0) return zm != 0 ? c : (z.sign & p.sign);

  int32_t re = p.e > z.exp ? p.e : z.exp;
  pm = align(pm, re - p.e);
  zm = align(zm, re - z.exp);
  const uint32_t rsign = pm >= zm ? p.sign : z.sign;
  uint32_t rm = p.sign == z.sign ? pm + zm : (pm >= zm ? pm - zm : zm - pm);
  if (rm == 0) return z.sign & p.sign;  // the signs differ here: +0

  // Leading one to bit 26; a result below the normal range stays at
  // exponent field 0 one place further right (its hidden bit is then a
  // fraction bit). A right shift keeps every lost bit as sticky: the shift
  // is at most 2 (rm < 2^29), so ttsim's mask (n | 1) is all of them.
  int32_t n = (31 - __builtin_clz(rm)) - 26;
  re += n;
  if (re >= 255) return rsign | kInf;
  if (re <= 0) {
    n += 1;
    re = 0;
  }
  if (n <= 0) rm <<= -n;
  else rm = (rm >> n) | ((rm & ((1u << n) - 1u)) != 0 ? 1u : 0u);

  uint32_t r = (static_cast<uint32_t>(re) << 23) + ((rm >> 3) & 0x7fffffu);
  if ((rm & 7u) + (r & 1u) > 4u) ++r;
  if ((r >> 23) == 0) r = 0;  // flushed, keeping the sign
  return rsign | r;
}

}  // namespace

uint32_t sfpu_mad_bits(uint32_t a, uint32_t b, uint32_t c, Arch arch) {
  return arch == Arch::Blackhole ? mad_bits_blackhole(a, b, c) : mad_bits_wormhole(a, b, c);
}

float sfpu_mad(float a, float b, float c, Arch arch) {
  return f32_from_bits(sfpu_mad_bits(f32_bits(a), f32_bits(b), f32_bits(c), arch));
}

float sfpu_mul(float a, float b, Arch arch) { return sfpu_mad(a, b, 0.0f, arch); }

float sfpu_add(float a, float b, Arch arch) { return sfpu_mad(1.0f, a, b, arch); }

}  // namespace mha::ttsim
