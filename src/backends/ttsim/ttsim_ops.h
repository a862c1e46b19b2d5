#pragma once
// TT-NN ops on emulated device tensors. Each op registers its program with
// the device (program cache), checks memory, then computes with the numeric
// core (src/ttsim): inputs as the unpacker delivers them, results packed to
// the op's output dtype.
#include <string>
#include <vector>

#include "backends/ttsim/ttsim_device.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/sfpu.h"

namespace mha::ttsim {

struct Grid {
  int y = 8, x = 8;
};

// ttnn.matmul / ttnn.linear: a (..., M, K) @ b (K, N) or (..., K, N), on the
// program TT-NN generates for the call (ttsim_matmul_program.h: `core_grid`
// says whether the call passed one, `grid`; K blocking follows from it).
// With `bias` (a linear's fused bias, added next by op_add in the same
// program) the result stays in the program's intermediate format, which the
// bias add reads; otherwise it is in cfg.output.
TileTensor op_matmul(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                     const ComputeConfig& cfg, Grid grid, bool core_grid, bool bias = false);

// ttnn.add (FPU ELWADD): b broadcasts over a's leading dims where b has 1,
// and over rows when b has one row (a bias).
TileTensor op_add(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b, DataFormat out,
                  bool fp32_dest, bool bfp8_pack_precise);

// ttnn.multiply by a Python float: the scalar becomes a bf16 operand of an
// FPU ELWMUL run at `fidelity`.
TileTensor op_mul_scalar(TtDevice& dev, const std::string& op, const TileTensor& a, float scalar, DataFormat out,
                         MathFidelity fidelity, bool fp32_dest, bool bfp8_pack_precise);

// ttnn.softmax(dim=-1), numeric_stable=false; output in cfg.output.
TileTensor op_softmax(TtDevice& dev, const std::string& op, const TileTensor& a, const ComputeConfig& cfg);

// Data movement (reshape, permute, split heads, concat heads): `values` are
// the logical row-major values of the result. bf16/fp32 values move exactly;
// block-float results are repacked by the packer as the device's transpose /
// untilize-retilize kernels do: 16-bit Dst, pack source Bfp8_b (those ops
// take no compute config, so bfp8_pack_precise is TT-NN's default, false).
TileTensor op_move(TtDevice& dev, const std::string& op, const TileTensor& in, const std::vector<float>& values,
                   const Shape& shape, DataFormat out);

}  // namespace mha::ttsim
