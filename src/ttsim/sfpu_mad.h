#pragma once
// Wormhole's SFPU multiply-add (SFPMAD, and SFPMUL / SFPADD / SFPMULI /
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
#include <cstdint>

namespace mha::ttsim {

// a * b + c on FP32 bit patterns.
uint32_t sfpu_mad_bits(uint32_t a, uint32_t b, uint32_t c);

// The same on floats (SFPMAD).
float sfpu_mad(float a, float b, float c);
// SFPMUL: a * b + 0 through the multiply-add (LReg 9 holds +0).
float sfpu_mul(float a, float b);
// SFPADD: 1.0 * a + b through the multiply-add (LReg 10 holds 1.0).
float sfpu_add(float a, float b);

}  // namespace mha::ttsim
