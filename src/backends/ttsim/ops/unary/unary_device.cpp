#include "backends/ttsim/ops/unary/unary.h"

namespace mha::ttsim {

// Input and output double-buffered.
TileTensor run_unary(TtDevice& dev, const std::string& op, const TileTensor& a, const UnaryAttributes& at) {
  const ComputeConfig& c = at.compute;
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(at), {&a}, a.shape, c.output, 2 * (tile_bytes(a.format) + tile_bytes(c.output)));
  TileTensor out = make_tile_tensor(a.shape, c.output);
  tt_unary(a, at.op, out, c.math_approx_mode, c.fp32_dest_acc_en, c.bfp8_pack_precise, dev.exec(), c.arch);
  return out;
}

}  // namespace mha::ttsim
