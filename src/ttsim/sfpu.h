#pragma once
// The Tensix vector unit (SFPU) functions softmax needs, and TT-NN's softmax.
//
// SFPU lanes compute in FP32, every multiply and add on the multiply-add
// of the generation `arch` names (sfpu_mad.h: the product is cut before the
// add, denormals are 0); results go back to Dst with SFPSTORE, which truncates to bf16 when Dst
// is 16-bit.
// Algorithms follow tt-llk's ckernel_sfpu_exp.h / ckernel_sfpu_recip.h; see
// docs/TTSIM.md for which TT-NN setting selects which.
#include "ttsim/matrix_unit.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

enum class ExpAlgorithm {
  FastApprox,   // approx mode, fast_and_approx (TT-NN default): Schraudolph, clamp at -88.5
  Approx,       // approx mode without fast_and_approx: 2^(x/ln2) with a linear mantissa
  Accurate21f,  // exact mode, 16-bit Dst: Moroz et al. exp_21f, rounded to bf16
  AccurateFp32, // exact mode, fp32 Dst: Cody-Waite reduction + degree-7 Taylor polynomial
};

// The algorithm exp_tile<approx> runs for this configuration.
ExpAlgorithm exp_algorithm(bool math_approx_mode, bool fp32_dest_acc_en);

// SFPSTORE into Dst: identity for FP32 Dst, truncation to bf16 otherwise.
float sfpu_store(float v, bool fp32_dest);

// SFP_STOCH_RND FP32 -> FP16B with stochastic rounding off: half away from
// zero on the magnitude, exponent-0 flushed to +0, Inf/NaN -> Inf.
float sfpu_round_bf16(float v);

// exp of one lane value, FP32 result before the store.
float sfpu_exp_lane(float x, ExpAlgorithm algo, Arch arch = Arch::Wormhole);
// exp_tile on one Dst value: algorithm chosen from the flags, then stored.
float sfpu_exp(float x, bool math_approx_mode, bool fp32_dest, Arch arch = Arch::Wormhole);

// exp_tile<true, true> after exp_init<true, scale> (fast approx with the
// scale folded into the constants on the host, as SDPA's kernels use it):
// y = max(x, -88.5f / scale), then A*scale * y + (B-C) on the SFPU, rounded
// to uint16 and shifted into the exponent: exp(x * scale) before the store.
float sfpu_exp_fast_approx_scaled(float x, float scale, Arch arch = Arch::Wormhole);
// The same over n values (n a multiple of 32 for `kern`); with `kern` the
// multiply-adds run on its lanes (mad_finite) where every operand allows
// it, bit-identical to the lane model (x and out may alias).
void sfpu_exp_fast_approx_scaled(const float* x, int64_t n, float scale, const simd::KernelTable* kern, Arch arch,
                                 float* out);

// Reciprocal lane. Wormhole: quadratic estimate on [1,2) and
// `newton_iters` Newton steps (at least one). Blackhole: SFPARECIP's
// 7-bit table estimate and `newton_iters` (0-2) Newton steps, each taken
// only where the residual is negative (a NaN residual, from 0 or Inf,
// keeps the estimate), as tt-llk's tt_llk_blackhole ckernel_sfpu_recip.h
// (547864af) runs it.
float sfpu_reciprocal_lane(float x, int newton_iters, Arch arch = Arch::Wormhole);
// recip_tile on one Dst value. Wormhole: approx 1 step, exact 1 step and a
// bf16 rounding for 16-bit Dst, 2 steps for FP32 Dst. Blackhole: approx the
// bare SFPARECIP estimate, exact as Wormhole's step counts.
float sfpu_reciprocal(float x, bool math_approx_mode, bool fp32_dest, Arch arch = Arch::Wormhole);

// SFPARECIP (Blackhole only): sign kept; a zero or denormal magnitude gives
// Inf, one of 2^126 or more (Inf and NaN included) gives 0; otherwise the
// exponent is mirrored (253 - e) and the top 7 mantissa bits index a table
// of 1/(1 + (i + 0.5)/128), 7 bits rounded to nearest; the low 16 bits are 0.
uint32_t sfpu_arecip_bits(uint32_t x);

// recip_tile as tt-metal's ckernel_sfpu_recip.h had it before the quadratic
// estimate: the significand as -m (m in [0.5, 1)), seed 1/ln2 * (2 - m/ln2),
// then Newton steps r *= (2 - m r) (1 in approx mode, 2 otherwise), the
// exponent rebuilt as 126 + exp(r) - exp(x); exact mode with a 16-bit Dst
// rounds to bf16. With fast approx exp this reproduces seed 000's hardware
// output bit for bit (docs/TTSIM.md).
float sfpu_reciprocal_legacy(float x, bool math_approx_mode, bool fp32_dest, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim
