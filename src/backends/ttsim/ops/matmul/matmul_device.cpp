#include <algorithm>

#include "backends/ttsim/ops/matmul/matmul.h"
#include "backends/ttsim/ops/matmul/matmul_program.h"

namespace mha::ttsim {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The program: TT-NN's selection for the shapes, or the explicit config's
// 2D multicast with its K blocking and the 2D factory's packer L1
// accumulation and intermediate format rules (kblock.h).
MatmulChoice program_choice(const TtDevice& dev, const TileTensor& a, const TileTensor& b, const MatmulAttributes& at) {
  if (at.in0_block_w > 0) {
    MatmulChoice c;
    c.blocking.in0_block_w = at.in0_block_w;
    c.blocking.packer_l1_acc = a.pcols / kTile > 2;
    c.blocking.interm = at.compute.fp32_dest_acc_en  ? DataFormat::Float32
                        : c.blocking.packer_l1_acc   ? DataFormat::Bfloat16
                                                     : at.compute.output;
    c.blocking.bias_fused = at.bias;
    return c;
  }
  MatmulCall call = matmul_call(a, b, at.compute);
  call.bias = at.bias;
  call.core_grid = at.core_grid;
  call.grid = at.grid;
  call.all_dram = dev.memory() == MemoryKind::DRAM;
  call.l1_bytes = dev.options().device.l1_bytes;
  call.packer_l1_acc = dev.options().packer_l1_acc;
  return choose_matmul_program(call);
}

}  // namespace

// Circular buffers of the multicast matmul: per core, double-buffered in0
// (per_core_M x in0_block_w) and in1 (in0_block_w x per_core_N) blocks and
// the whole output block.
TileTensor run_matmul(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                      const MatmulAttributes& at) {
  const ComputeConfig& cfg = at.compute;
  const double macs = static_cast<double>(a.batch) * a.prows * a.pcols * b.pcols * fidelity_phase_count(cfg.math_fidelity);
  TtDevice::OpTimer timer(dev, op, macs);
  const int64_t Mt = a.batch * a.prows / kTile, Kt = a.pcols / kTile, Nt = b.pcols / kTile;
  const MatmulChoice choice = program_choice(dev, a, b, at);
  ComputeConfig c = cfg;
  if (at.bias) c.output = choice.blocking.interm;
  Shape out_shape = a.shape;
  out_shape.back() = b.cols;
  // A batched matmul walks its batches one matrix at a time per core, so a
  // core's output block never spans more than one matrix's rows.
  const int64_t pm = std::min(ceil_div(Mt, at.grid.y), a.prows / kTile), pn = ceil_div(Nt, at.grid.x);
  const int64_t bw = choice.blocking.blocks(Kt) == 1 ? std::min<int64_t>(Kt, 2) : choice.blocking.in0_block_w;
  // An explicit program config sizes its blocks from the model's own chunks
  // (tt_transformers splits long prefills into 2048-row calls), which this
  // call does not see: its buffers are not budgeted here.
  const int64_t cb = at.in0_block_w > 0 ? 0
                                        : 2 * pm * bw * tile_bytes(a.format) + 2 * bw * pn * tile_bytes(b.format) +
                                              pm * pn * tile_bytes(c.output);
  const std::string program = at.in0_block_w > 0 ? "program_config=2D" : matmul_choice_str(choice, Kt);
  launch_program(dev, op, program_key(at) + "," + program, {&a, &b}, out_shape, c.output, cb);
  TileTensor out;
  tt_matmul(a, b, out, c, dev.exec(), choice.blocking);
  return out;
}

}  // namespace mha::ttsim
