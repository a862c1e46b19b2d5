#pragma once
// Which matmul program TT-NN generates for a call without a program_config,
// and what that means for K: the block width (in0_block_w), whether the
// packer accumulates partials in L1, and the intermediate buffer's format.
// Only what changes numerics is modelled (subblock and out-block sizes do
// not: every output tile sees the same K order). Rules from tt-metal's
// matmul_program_config.cpp and the program factories; docs/TTSIM.md
// ("Matmul K blocking") names them.
#include <cstdint>
#include <optional>
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "ttsim/kblock.h"

namespace mha::ttsim {

enum class MatmulProgram {
  MultiCore,      // MatmulMultiCoreProgramConfig (bmm.cpp): all of K in Dst
  Reuse,          // MatmulMultiCoreReuseProgramConfig (batched in1 with a core_grid)
  Mcast1D,        // MatmulMultiCoreReuseMultiCast1DProgramConfig
  Mcast2D,        // MatmulMultiCoreReuseMultiCastProgramConfig
};
const char* matmul_program_name(MatmulProgram p);

// One ttnn.matmul / ttnn.linear call as the program selection sees it.
struct MatmulCall {
  int64_t batch_a = 1, batch_b = 1;  // a's and b's leading dims (b: 1 when shared)
  int64_t M = 32, K = 32, N = 32;    // padded per-matrix sizes (multiples of 32)
  DataFormat a = DataFormat::Bfloat16, b = DataFormat::Bfloat16, out = DataFormat::Bfloat16;
  bool fp32_dest = false;
  bool bias = false;                  // ttnn.linear with a bias (fused into the program)
  bool core_grid = false;             // the call passed core_grid
  Grid grid;                          // that grid, else the device's compute grid
  bool all_dram = false;              // inputs and output DRAM interleaved
  int64_t l1_bytes = 1464 * 1024;     // the device's L1 per core
  std::optional<bool> packer_l1_acc;  // unset: TT-NN's default (on unless the output is float32)
};

struct MatmulChoice {
  MatmulProgram program = MatmulProgram::MultiCore;
  MatmulBlocking blocking;  // in0_block_w 0 for MultiCore
};

// The call's shapes, formats and Dst mode from its operands and compute
// config; placement (core_grid, grid, memory, L1, packer_l1_acc) and bias
// are left for the caller.
MatmulCall matmul_call(const TileTensor& a, const TileTensor& b, const ComputeConfig& cfg);

MatmulChoice choose_matmul_program(const MatmulCall& call);

// "2D,in0_block_w=4,blocks=8,l1_acc=1,interm=bfloat16" (program cache key, describe()).
std::string matmul_choice_str(const MatmulChoice& c, int64_t Kt);

}  // namespace mha::ttsim
