#pragma once
// The SFPU multiply-add of each generation (arch.h). Wormhole's (SFPMAD, and SFPMUL / SFPADD / SFPMULI /
// SFPADDI, which are the same unit with +0 or 1.0 as one operand), bit for
// bit as Tenstorrent's ttsim models it (src/fma.cpp `fma_model_wh`; rules in
// docs/TTSIM.md, "SFPU multiply-add"). It is not an IEEE fused multiply-add:
// - inputs with exponent field 0 (zero, denormal) are zero;
// - the 48-bit product is cut to 28 bits, the bits cut off OR-ed into the
//   lowest kept bit, before the add;
// - the smaller addend is shifted to the larger's exponent with the lost bits
//   OR-ed into its lowest bit only when something is left;
// - the sum is rounded to nearest even on three extra bits, of which the
//   lowest is sticky only for itself when the sum carried two places;
// - zero and denormal results are +0 (sign dropped), an exact cancellation is
//   +0, a product below the smallest normal exponent is dropped (result c, or
//   +0 when c is zero);
// - NaN results are 0x7f800001 with the product's (or c's) sign, and when the
//   NaN came from Inf * 0 the sum's bits leak into the payload.
// Blackhole's (ttsim `fma_model_bh`) has the same product cut, alignment
// and rounding, and differs in the corners:
// - a sum that carried keeps every bit it shifts out as sticky;
// - zero results keep a sign: an unused product (zero, or below the
//   smallest exponent) with a zero or denormal c, and an exact cancellation,
//   give the sign of c AND the product's (so -0 only when both are
//   negative);
// - a result below the normal range is rounded at exponent field 0 (one
//   place lower than a normal result) and flushed to a zero of its own
//   sign, unless the rounding carried it up to the smallest normal;
// - NaN results are the canonical 0x7fc00000 at once; c = -Inf with a
//   finite product that overflows gives c (Wormhole: NaN).
#include <cstdint>

#include "ttsim/arch.h"

namespace mha::ttsim {

// a * b + c on FP32 bit patterns.
uint32_t sfpu_mad_bits(uint32_t a, uint32_t b, uint32_t c, Arch arch = Arch::Wormhole);

// The same on floats (SFPMAD).
float sfpu_mad(float a, float b, float c, Arch arch = Arch::Wormhole);
// SFPMUL: a * b + 0 through the multiply-add (LReg 9 holds +0).
float sfpu_mul(float a, float b, Arch arch = Arch::Wormhole);
// SFPADD: 1.0 * a + b through the multiply-add (LReg 10 holds 1.0).
float sfpu_add(float a, float b, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim
