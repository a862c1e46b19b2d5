#pragma once
// ttnn.matmul / ttnn.linear on the emulated device: a (..., M, K) @ b (K, N)
// or (..., K, N), on the program TT-NN generates for the call
// (matmul_program.h) or the explicit program config's K blocking.
#include <cstdint>
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim {

struct MatmulAttributes {
  ComputeConfig compute;
  Grid grid;               // the core grid the program runs on
  bool core_grid = false;  // the call passed core_grid (TT-NN then picks another program)
  // A linear's fused bias follows (added next by `add` in the same program):
  // the result stays in the program's intermediate format, which the add reads.
  bool bias = false;
  // An explicit MatmulMultiCoreReuseMultiCastProgramConfig's in0_block_w
  // (tt_transformers' XQKV_PREFILL_PROGCFG: 1); 0: TT-NN's own selection.
  int64_t in0_block_w = 0;

  template <class V>
  void fields(V& v) {
    v("grid_y", grid.y, "core grid rows", fields::kDerived);
    v("grid_x", grid.x, "core grid columns", fields::kDerived);
    v("core_grid", core_grid, "the call passed a core_grid", fields::kDerived);
    v("bias", bias, "a fused bias follows", fields::kDerived);
    v("in0_block_w", in0_block_w, "an explicit program config's K block (0: TT-NN's choice)", fields::kDerived);
    compute.fields(v, fields::kDerived);
  }
};

// Runs the op under the program name `op` ("ttnn.matmul", "ttnn.linear").
TileTensor run_matmul(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                      const MatmulAttributes& attrs);

}  // namespace mha::ttsim
