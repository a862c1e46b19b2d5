// Bit-level model of the Wormhole and Blackhole matrix unit's multiply-accumulate datapath.
// Learned from tenstorrent/ttsim src/tensix.cpp (mvmul, elwmul, elwadd,
// fpu_accum_normalize_encode) and tt-isa-documentation MVMUL.md / SrcASrcB.md;
// written independently. See docs/TTSIM.md.
#include <algorithm>
#include <cstdint>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim {
namespace detail {

uint32_t accumulate(Term t0, Term t1, uint32_t dst_bits, bool fp32_dest, Arch arch) {
  Term d;
  d.sign = dst_bits >> 31;
  d.exp = static_cast<int32_t>((dst_bits >> 23) & 255u);
  d.man = d.exp ? static_cast<int64_t>((dst_bits & 0x7fffffu) | 0x800000u) : 0;

  int32_t exp = std::max({t0.exp, t1.exp, d.exp});
  if (exp <= 0) return 0;  // everything underflowed before normalisation
  // Product terms round half up in signed value (a negative tie goes toward
  // zero); the Dst term rounds half away from zero.
  auto align = [exp](Term& t, bool signed_tie) {
    if (t.exp >= exp) return;
    int32_t gap = exp - t.exp;
    if (gap >= 31) {
      t.man = 0;
      return;
    }
    int64_t bias = (int64_t(1) << (gap - 1)) - (signed_tie ? static_cast<int64_t>(t.sign) : 0);
    t.man = (t.man + bias) >> gap;
  };
  align(t0, true);
  align(t1, true);
  align(d, false);
  if (!fp32_dest) {  // a 16-bit Dst only keeps 11 significant bits of each term
    t0.man = (t0.man + 4096 - t0.sign) & ~int64_t(0x1fff);
    t1.man = (t1.man + 4096 - t1.sign) & ~int64_t(0x1fff);
    d.man = (d.man + 4096) & ~int64_t(0x1fff);
  }

  uint32_t sign = d.sign;
  int64_t man = d.man;
  man += (t0.sign == sign) ? t0.man : -t0.man;
  man += (t1.sign == sign) ? t1.man : -t1.man;
  if (man < 0) {
    man = -man;
    sign ^= 1u;
  }
  if (man == 0) return 0;  // exact cancellation gives +0

  int32_t shift = __builtin_clzll(static_cast<uint64_t>(man)) - 40;  // leading one to bit 23
  if (arch == Arch::Wormhole && sign && man == 1) shift -= 27;  // its leading-sign counter misreads -1
  exp -= shift;
  if (!fp32_dest) shift -= 16;  // keep hidden + 7 bits: BF16 Dst
  if (shift < 0) {
    int32_t r = -shift;
    man = r >= 63 ? 0 : (man + (int64_t(1) << (r - 1))) >> r;  // half away from zero
  } else {
    man <<= shift;
  }
  if (!fp32_dest) man <<= 16;
  if (man & 0x1000000) ++exp;  // rounding carried into a new leading bit
  uint32_t frac = static_cast<uint32_t>(man) & 0x7fffffu;
  if (exp <= 0) return 0;
  if (exp >= 255) return (sign << 31) | 0x7f800000u;
  return (sign << 31) | (static_cast<uint32_t>(exp) << 23) | frac;
}

uint32_t dot16(const SrcDatum* srcb, const SrcDatum* srca, uint32_t dst_bits, int phase,
               bool fp32_dest, Arch arch) {
  // Rebias so that exponent fields add to an FP32 exponent; the low pieces
  // weigh 2^-5 (SrcA) and 2^-7 (SrcB) of the high ones.
  const int32_t adj = -127 - ((phase & 1) ? 5 : 0) - ((phase & 2) ? 7 : 0);
  const int ia = phase & 1, ib = (phase >> 1) & 1;
  Term group[2];
  for (int g = 0; g < 2; ++g) {
    int32_t exps[8];
    uint32_t mans[8], signs[8];
    int32_t top = 0;
    for (int i = 0; i < 8; ++i) {
      const SrcDatum& b = srcb[8 * g + i];
      const SrcDatum& a = srca[8 * g + i];
      if (a.zero || b.zero) {
        exps[i] = 0, mans[i] = 0, signs[i] = 0;
      } else {
        exps[i] = a.exp + b.exp + adj;
        mans[i] = static_cast<uint32_t>(a.piece[ia]) * b.piece[ib];  // <= 12 bits
        signs[i] = a.sign ^ b.sign;
      }
      top = i == 0 ? exps[0] : std::max(top, exps[i]);
    }
    if (top <= 0) continue;  // the whole group is zero or underflowed
    int64_t sum = 0;
    for (int i = 0; i < 8; ++i) {
      uint32_t gap = static_cast<uint32_t>(std::min<int64_t>(int64_t(top) - exps[i], 30));
      int64_t m = ((int64_t(mans[i]) << 1) + (int64_t(1) << gap)) >> (gap + 1);  // half up
      sum += signs[i] ? -m : m;
    }
    if (sum < 0) {
      group[g].sign = 1;
      sum = -sum;
    }
    group[g].man = sum << 13;  // 12-bit products carry their hidden bit at bit 10; move it to 23
    group[g].exp = top;
  }
  return accumulate(group[0], group[1], dst_bits, fp32_dest, arch);
}

}  // namespace detail

float fpu_dot16(const float* srcb, const float* srca, float dst, int phase, bool fp32_dest, bool tf32_src,
                Arch arch) {
  detail::SrcDatum b[16], a[16];
  for (int k = 0; k < 16; ++k) {
    // Src holds 19 bits: bf16 keeps 7 mantissa bits, tf32 keeps 10.
    uint32_t mask = tf32_src ? 0xffffe000u : 0xffff0000u;
    b[k] = detail::encode_srcb(f32_from_bits(f32_bits(srcb[k]) & mask));
    a[k] = detail::encode_srca(f32_from_bits(f32_bits(srca[k]) & mask));
  }
  return f32_from_bits(detail::dot16(b, a, f32_bits(dst), phase, fp32_dest, arch));
}

float fpu_mul_phase(float srca, float srcb, float dst, int phase, bool fp32_dest, Arch arch) {
  float b[16] = {srcb}, a[16] = {srca};
  return fpu_dot16(b, a, dst, phase, fp32_dest, false, arch);
}

float fpu_mul(float srca, float srcb, MathFidelity fidelity, bool fp32_dest, Arch arch) {
  float dst = 0.0f;
  for (int p = 0; p < fidelity_phase_count(fidelity); ++p) dst = fpu_mul_phase(srca, srcb, dst, p, fp32_dest, arch);
  return dst;
}

float fpu_add(float a, float b, bool fp32_dest, Arch arch) {
  // ELWADD aligns the two 11-bit significands to the larger exponent with
  // half-up rounding, adds, then normalises through the shared adder.
  uint32_t ua = f32_bits(a) & 0xffffe000u, ub = f32_bits(b) & 0xffffe000u;
  if ((ua & 0x7f800000u) == 0) ua = 0;
  if ((ub & 0x7f800000u) == 0) ub = 0;
  if ((ua & 0x7fffffffu) < (ub & 0x7fffffffu)) std::swap(ua, ub);
  int32_t ea = (ua >> 23) & 255, eb = (ub >> 23) & 255;
  uint32_t ma = ua ? ((ua >> 13) & 0x3ffu) | 0x400u : 0;
  uint32_t mb = ub ? ((ub >> 13) & 0x3ffu) | 0x400u : 0;
  if (eb < ea) {
    int32_t gap = ea - eb;
    mb = gap < 12 ? (mb + (1u << (gap - 1))) >> gap : 0;
  }
  uint32_t sa = ua >> 31, sb = ub >> 31;
  detail::Term t;
  t.sign = sa;
  t.exp = ea;
  t.man = static_cast<int64_t>(sa == sb ? ma + mb : ma - mb) << 13;
  // A plain add does not accumulate onto Dst: the adder's Dst input is zero.
  return f32_from_bits(detail::accumulate(t, detail::Term{}, 0u, fp32_dest, arch));
}

}  // namespace mha::ttsim
