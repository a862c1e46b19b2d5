// Wormhole SFPMAD. Rules learned from Tenstorrent's ttsim (src/fma.cpp,
// fma_model_wh, v1.10.0) and written independently; docs/TTSIM.md states
// them. Fixed-point frame: a significand m with exponent field e stands for
// m * 2^(e - 127 - 26), i.e. 1.0 is 2^26 (23 fraction bits + 3 extra bits).
#include "ttsim/sfpu_mad.h"

#include "tensor/half.h"

namespace mha::ttsim {

namespace {

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kInf = 0x7f800000u;
constexpr uint32_t kHidden = 0x800000u;

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

}  // namespace

// Shapes: three scalars. The product of the two 24-bit significands (48
// bits, 1.0 * 1.0 = 2^46) is brought to the 2^26 frame by dropping 20 bits
// into a sticky bit; its exponent field is ea + eb - 127.
uint32_t sfpu_mad_bits(uint32_t a, uint32_t b, uint32_t c) {
  const Operand x = unpack(a), y = unpack(b), z = unpack(c);
  const uint32_t psign = x.sign ^ y.sign;
  const uint64_t full = static_cast<uint64_t>(x.sig) * y.sig;
  uint32_t pm = static_cast<uint32_t>(full >> 20) | ((full & 0xfffffu) != 0 ? 1u : 0u);
  int32_t pe = x.exp + y.exp - 127;
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

float sfpu_mad(float a, float b, float c) { return f32_from_bits(sfpu_mad_bits(f32_bits(a), f32_bits(b), f32_bits(c))); }

float sfpu_mul(float a, float b) { return sfpu_mad(a, b, 0.0f); }

float sfpu_add(float a, float b) { return sfpu_mad(1.0f, a, b); }

}  // namespace mha::ttsim
