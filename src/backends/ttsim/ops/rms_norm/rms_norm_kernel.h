#pragma once
// ttnn.rms_norm's compute kernel (tt-metal's layernorm.cpp built for RMS
// norm, interleaved input, no pre-add), emulated on src/ttsim's FPU, SFPU
// and packer. The revision read and the factory's buffer formats are in
// docs/TTSIM.md ("rms_norm").
#include <vector>

#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// Per row of `x` (any batch, tiled; all of a row's tiles in one core's
// buffers), every step packed to its circular buffer's format: im =
// Float32 with fp32_dest_acc_en, else bfloat16:
//   x2  = pack_im(ELWMUL(x, x))                        mul_tiles
//   ex2 = pack_im(REDUCE_ROW sum of x2 * (1/Wp)_bf16)   reduce_tile, all
//         of the row's tiles into one Dst (matrix unit, data in SrcA, the
//         scaler in SrcB), Wp the padded width as the factory passes it
//   r   = pack_im(recip(sqrt(ex2 + eps_bf16)))          add_tiles, sqrt_tile,
//         recip_tile on the SFPU (math_approx_mode picks both algorithms)
//   y   = pack(ELWMUL(x, r))                            mul_tiles_bcast_cols
//   out = pack_out(ELWMUL(y, gamma))                    mul_tiles_bcast_rows
// y is packed to im when `gamma` is given, else it is the output. eps and
// 1/Wp reach the kernel truncated to bfloat16 (the reader's scalar tiles).
// Multiplies read Float32-buffer operands as TF32 (the unpacker's cut with
// an fp32 Dst). `gamma`: x.pcols values as Src holds them (zero past
// x.cols), or empty. out gets cfg.output. Rows run in 32-row blocks on
// ex's pool; ex.isa Scalar runs the lane models (the oracle), any other the
// vector kernels for the reduce and for the multiplies of bfloat16
// operands (bit-identical; tests compare them).
void tt_rms_norm(const TileTensor& x, const std::vector<float>& gamma, float epsilon, TileTensor& out,
                 const ComputeConfig& cfg, const Exec& ex = Exec{});

}  // namespace mha::ttsim
