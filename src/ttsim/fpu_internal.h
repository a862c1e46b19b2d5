#pragma once
// Internal to src/ttsim: operands pre-split for the bit-level FPU model, so
// matmul encodes each element once rather than once per dot product.
#include <cstdint>
#include <cstring>

#include "ttsim/arch.h"

namespace mha::ttsim::detail {

// A Src datum (sign, 8-bit exponent, 10-bit mantissa; bf16 uses the top 7)
// with its significand already cut into the two multiplier pieces.
struct SrcDatum {
  uint8_t sign = 0;
  uint8_t zero = 1;     // exponent field 0: treated as zero by the multipliers
  int16_t exp = 0;      // raw exponent field
  uint8_t piece[2] = {0, 0};  // [0]: high piece, [1]: low piece, both pre-aligned
};

// The fields both Src roles share; the roles differ only in how they cut
// the significand (hidden bit + 10 mantissa bits, returned in sig) into
// multiplier pieces. Inline: operands are decoded once per element per
// matmul, tens of millions of times at seed 002's shape.
inline SrcDatum src_fields(float x, uint32_t& sig) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  SrcDatum d;
  d.sign = static_cast<uint8_t>(u >> 31);
  d.exp = static_cast<int16_t>((u >> 23) & 255u);
  d.zero = d.exp == 0;
  sig = ((u >> 13) & 0x3ffu) | 0x400u;
  return d;
}

// In SrcA role (in1 / B): pieces are 5 bits: hidden+4 top bits, then the next 5.
inline SrcDatum encode_srca(float x) {
  uint32_t m;
  SrcDatum d = src_fields(x, m);
  d.piece[0] = static_cast<uint8_t>(m >> 6);
  d.piece[1] = static_cast<uint8_t>((m >> 1) & 31u);
  return d;
}

// In SrcB role (in0 / A): pieces are 7 bits: hidden+6 top bits, then the last 4 (<<3).
inline SrcDatum encode_srcb(float x) {
  uint32_t m;
  SrcDatum d = src_fields(x, m);
  d.piece[0] = static_cast<uint8_t>(m >> 4);
  d.piece[1] = static_cast<uint8_t>((m & 15u) << 3);
  return d;
}

// A sum-of-products term entering the Dst adder.
struct Term {
  uint32_t sign = 0;
  int32_t exp = 0;  // FP32-biased exponent of bit 23 of man
  int64_t man = 0;  // magnitude
};

// The adder behind every FPU multiply-accumulate: aligns two terms and the
// Dst value to their largest exponent (each right shift rounds: product
// terms half up in signed value, Dst half away from zero), drops all but 11
// significant bits of each when Dst is 16-bit, adds, and normalises with
// round half away from zero to FP32 (or to bf16 when !fp32_dest). Returns FP32
// bits; exponent <= 0 flushes to +0, >= 255 gives signed Inf. On Wormhole
// a sum of exactly -1 unit is misnormalised (its leading-sign counter reads
// all ones); Blackhole normalises it.
uint32_t accumulate(Term t0, Term t1, uint32_t dst_bits, bool fp32_dest, Arch arch = Arch::Wormhole);

// One lane of MVMUL: dst_bits + sum over 16 terms for one phase. dst_bits is
// an FP32 bit pattern (a bf16 value when !fp32_dest); returns the same kind.
uint32_t dot16(const SrcDatum* srcb, const SrcDatum* srca, uint32_t dst_bits, int phase,
               bool fp32_dest, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim::detail
