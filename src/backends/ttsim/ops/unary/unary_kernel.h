#pragma once
// TT-NN's SFPU unary ops (ttnn.exp, ttnn.reciprocal) on tile tensors, built
// on the lane functions of sfpu.h: what `mha op` runs one at a time (the
// binary ops are in eltwise.h).
#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

enum class UnaryOp { Exp, Reciprocal };
const char* unary_op_name(UnaryOp op);

// The eltwise_sfpu compute kernel per tile: copy_tile (unpack to Dst: a
// float32 input goes to an FP32 Dst whole, as TT-NN's
// preserve_fp32_precision unpacks to Dst; other inputs as the unpacker
// delivers them to Src, see unpack_to_src), the SFPU op on every Dst value
// (exp_tile / recip_tile for math_approx_mode and fp32_dest, which also
// store the result), then the packer to out.format.
//   a [..., rows, cols] -> out [..., rows, cols], out preallocated in its format.
// bfp8_pack_precise picks the packer's source for a block-float out
// (packer.h).
// `arch`: whose SFPU computes (arch.h).
void tt_unary(const TileTensor& a, UnaryOp op, TileTensor& out, bool math_approx_mode, bool fp32_dest,
              bool bfp8_pack_precise, const Exec& ex = Exec{}, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim
