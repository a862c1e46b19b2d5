#pragma once
// ttnn.softmax's compute kernel, emulated on src/ttsim's SFPU, matrix unit
// and packer.
#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// ttnn.softmax(x, dim=-1) with numeric_stable=false, on the logical columns
// of every row of `in` (bf16/bfp/fp32 tile tensor). Intermediates as the
// kernel keeps them: exp in Dst then packed to the intermediate format (bf16,
// or fp32 with fp32_dest_acc_en), row sums on the matrix unit against a
// scaler of 1.0, the reciprocal on the SFPU, then an FPU multiply; padded
// columns are masked to -inf before exp. `out` gets cfg.output format.
// Rows run in 32-row blocks on ex's pool; ex.isa Scalar runs the lane
// models, otherwise exp (fast approx), the row sums and the multiply run on
// the vector kernels (bit-identical).
void tt_softmax(const TileTensor& in, TileTensor& out, const ComputeConfig& cfg, const Exec& ex = Exec{});

// TT-NN's softmax defaults: HiFi4, approx mode on, fp32 accumulation off.
ComputeConfig softmax_default_config();

}  // namespace mha::ttsim
