#include "backends/ttsim/ops/softmax/softmax.h"

#include "backends/ttsim/ops/softmax/softmax_kernel.h"

namespace mha::ttsim {

// The softmax kernel holds a whole row of tiles (input and exps) per core.
TileTensor run_softmax(TtDevice& dev, const std::string& op, const TileTensor& a, const SoftmaxAttributes& at) {
  const ComputeConfig& cfg = at.compute;
  TtDevice::OpTimer timer(dev, op);
  const int64_t wt = a.pcols / kTile;
  const DataFormat im = cfg.fp32_dest_acc_en ? DataFormat::Float32 : DataFormat::Bfloat16;
  launch_program(dev, op, program_key(at), {&a}, a.shape, cfg.output,
                 wt * (tile_bytes(a.format) + tile_bytes(im)) + 4 * tile_bytes(im) + 2 * tile_bytes(cfg.output));
  TileTensor out;
  tt_softmax(a, out, cfg, dev.exec());
  return out;
}

}  // namespace mha::ttsim
