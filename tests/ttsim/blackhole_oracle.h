#pragma once
// Test oracles for Blackhole's lane ops: a second, independent statement of
// what Tenstorrent's ttsim (v1.10.0, src/fma.cpp fma_model_bh; src/tensix.cpp
// SFPARECIP and fpu_accum_normalize_encode) computes, written from reading it
// and kept deliberately unlike the models under test (src/ttsim): one
// 64-bit working value with three guard bits, signed arithmetic, a table
// built from its defining property. The tests compare the two bit for bit.
#include <cstdint>

namespace mha::ttsim::oracle {

// Blackhole SFPMAD, x * y + z on FP32 bit patterns.
inline uint32_t bh_mad(uint32_t x, uint32_t y, uint32_t z) {
  auto exp_of = [](uint32_t v) { return static_cast<int>((v >> 23) & 0xffu); };
  // Significand with the hidden bit, or nothing when the exponent is 0.
  auto sig_of = [&](uint32_t v) -> uint64_t { return exp_of(v) ? (v & 0x7fffffu) + 0x800000u : 0; };
  const int ex = exp_of(x), ey = exp_of(y), ez = exp_of(z);
  const uint64_t mx = sig_of(x), my = sig_of(y), mz = sig_of(z);
  const uint32_t sp = (x ^ y) >> 31, sz = z >> 31;
  // Product: 48 bits with three guard bits appended, then 23 bits dropped
  // (any of them set leaves a 1 in the lowest place): the same frame as z
  // with its guard bits, weight 2^(e - 150 - 3).
  uint64_t p = (mx * my) << 3;
  p = (p >> 23) | ((p & 0x7fffffu) ? 1 : 0);
  int pe = ex + ey - 127;
  uint64_t q = mz << 3;
  const bool x_special = ex == 255, y_special = ey == 255;
  if (x_special || y_special || ez == 255 || pe >= 255) {
    const bool nan = (x_special && (mx != 0x800000u || my == 0)) || (y_special && (my != 0x800000u || mx == 0)) ||
                     (ez == 255 && mz != 0x800000u) || (ez == 255 && (x_special || y_special) && sz != sp);
    if (nan) return 0x7fc00000u;
    if (ez == 255) return z;
    return (sp << 31) | 0x7f800000u;
  }
  if (p == 0 || pe < 0) return q ? z : ((sz & sp) << 31);
  // Shift right by s: what is lost is OR-ed into bit 0, but only if any
  // bit remains; shifting 64 or more places leaves nothing.
  auto semi_sticky = [](uint64_t v, int s) -> uint64_t {
    if (s <= 0) return v;
    if (s >= 64) return 0;
    const uint64_t r = v >> s;
    return r == 0 ? 0 : (r | (((r << s) != v) ? 1 : 0));
  };
  int e = pe > ez ? pe : ez;
  p = semi_sticky(p, e - pe);
  q = semi_sticky(q, e - ez);
  const int64_t sum = (sp ? -1 : 1) * static_cast<int64_t>(p) + (sz ? -1 : 1) * static_cast<int64_t>(q);
  if (sum == 0) return (sz & sp) << 31;
  const uint32_t sr = sum < 0;
  uint64_t m = static_cast<uint64_t>(sum < 0 ? -sum : sum);
  int top = 63;
  while (!((m >> top) & 1)) --top;
  int n = top - 26;  // places to move right so the leading one sits at bit 26
  e += n;
  if (e >= 255) return (sr << 31) | 0x7f800000u;
  if (e <= 0) {
    n += 1;
    e = 0;
  }
  if (n < 0) {
    m <<= -n;
  } else if (n > 0) {
    const uint64_t lost = m & ((uint64_t(1) << n) - 1);
    m = (m >> n) | (lost ? 1 : 0);
  }
  uint32_t r = (static_cast<uint32_t>(e) << 23) + static_cast<uint32_t>((m >> 3) & 0x7fffffu);
  const uint32_t guard = m & 7u;
  if (guard > 4 || (guard == 4 && (r & 1u))) r += 1;
  if (r < 0x800000u) r = 0;
  return (sr << 31) | r;
}

// SFPARECIP on a magnitude: the 7-bit table is, for each top-7 mantissa
// index i, the 7-bit fraction of 2 / (1 + (i + 0.5) / 128) - 1 rounded
// to nearest (checked against ttsim's listed values in the tests).
inline uint32_t bh_arecip_table(int i) {
  const double mid = 1.0 + (i + 0.5) / 128.0;
  const double f = 2.0 / mid - 1.0;  // in (0, 1]
  int v = static_cast<int>(f * 128.0 + 0.5);
  return static_cast<uint32_t>(v > 127 ? 127 : v);
}

// SFPARECIP on FP32 bits: sign kept; magnitudes below the smallest normal
// give Inf, 2^126 and above (Inf, NaN) give 0; otherwise exponent 253 - e and
// the table entry of the top 7 mantissa bits as the top 7 fraction bits.
inline uint32_t bh_arecip(uint32_t x) {
  const uint32_t sign = x >> 31 << 31;
  const uint32_t e = (x >> 23) & 0xffu;
  if (e == 0) return sign | 0x7f800000u;
  if (e >= 253) return sign;  // 0x7e800000 is 2^126: exponent field 253
  return sign | ((253u - e) << 23) | (bh_arecip_table(static_cast<int>((x >> 16) & 0x7fu)) << 16);
}

// Blackhole recip_tile's lane before the store (tt-llk tt_llk_blackhole
// ckernel_sfpu_recip.h at 547864af, _sfpu_reciprocal_<iters>): the estimate,
// then up to two Newton steps gated by the first residual being negative.
inline uint32_t bh_recip_lane(uint32_t x, int iters) {
  uint32_t y = bh_arecip(x);
  if (iters == 0) return y;
  const uint32_t neg_two = 0xc0000000u, neg_zero = 0x80000000u;
  uint32_t t = bh_mad(x, y, neg_two);                 // x y - 2
  if ((t >> 31) == 0) return y;  // v_if (t < 0): SFPSETCC's sign-bit test; NaN here is +
  uint32_t y1 = bh_mad(y, t ^ 0x80000000u, neg_zero);  // y (2 - x y)
  if (iters == 1) return y1;
  t = bh_mad(x, y1, neg_two);
  return bh_mad(y1, t ^ 0x80000000u, neg_zero);
}

// Blackhole's FPU adder (ttsim fpu_accum_normalize_encode without the
// Wormhole -1 branch): two product terms (sign, exponent of bit 23,
// magnitude) and a Dst value, aligned to the largest exponent (terms round
// half up in signed value, Dst half away from zero), cut to 11 significant
// bits each for a 16-bit Dst, summed, normalised with round half away from
// zero to 24 bits (FP32 Dst) or 8 (bf16 Dst).
struct OracleTerm {
  uint32_t sign;
  int exp;
  int64_t man;
};

inline uint32_t bh_accumulate(OracleTerm t0, OracleTerm t1, uint32_t dst, bool fp32) {
  OracleTerm d{dst >> 31, static_cast<int>((dst >> 23) & 0xffu), 0};
  d.man = d.exp ? static_cast<int64_t>((dst & 0x7fffffu) | 0x800000u) : 0;
  int e = t0.exp;
  if (t1.exp > e) e = t1.exp;
  if (d.exp > e) e = d.exp;
  if (e <= 0) return 0;
  auto to_e = [e](OracleTerm& t, bool product) {
    const int gap = e - t.exp;
    if (gap == 0) return;
    if (gap >= 31) {
      t.man = 0;
      return;
    }
    const int64_t half = int64_t(1) << (gap - 1);
    t.man = (t.man + half - (product ? t.sign : 0)) >> gap;
  };
  to_e(t0, true);
  to_e(t1, true);
  to_e(d, false);
  if (!fp32) {
    const int64_t grid = 8192;
    t0.man = (t0.man + grid / 2 - t0.sign) / grid * grid;
    t1.man = (t1.man + grid / 2 - t1.sign) / grid * grid;
    d.man = (d.man + grid / 2) / grid * grid;
  }
  const int64_t total = (d.sign ? -d.man : d.man) + (t0.sign ? -t0.man : t0.man) + (t1.sign ? -t1.man : t1.man);
  if (total == 0) return 0;
  const uint32_t sign = total < 0;
  uint64_t mag = static_cast<uint64_t>(total < 0 ? -total : total);
  int lead = 0;
  while ((mag >> (lead + 1)) != 0) ++lead;
  const int keep = fp32 ? 24 : 8;
  int ex = e + (lead - 23);
  if (lead + 1 > keep) {
    const int drop = lead + 1 - keep;
    mag = (mag + (uint64_t(1) << (drop - 1))) >> drop;
  } else {
    mag <<= keep - lead - 1;
  }
  if (mag >> keep) {  // rounding reached a new leading bit
    ++ex;
    mag >>= 1;
  }
  if (ex <= 0) return 0;
  if (ex >= 255) return (sign << 31) | 0x7f800000u;
  return (sign << 31) | (static_cast<uint32_t>(ex) << 23) | static_cast<uint32_t>((mag << (24 - keep)) & 0x7fffffu);
}

}  // namespace mha::ttsim::oracle
