#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"

namespace mha::ttsim {

// Per core: x, cos, sin and the rotated tiles of one row of dh, the
// transformation tile, the output double-buffered.
TileTensor run_rotary_llama(TtDevice& dev, const TileTensor& x, const TileTensor& cos, const TileTensor& sin,
                            const TileTensor& trans, const RotaryAttributes& at) {
  const std::string op = "ttnn.experimental.rotary_embedding_llama";
  TtDevice::OpTimer timer(dev, op);
  const int64_t wt = x.pcols / kTile, im = tile_bytes(DataFormat::Bfloat16);
  const int64_t cb = wt * (tile_bytes(x.format) + tile_bytes(cos.format) + tile_bytes(sin.format) + 2 * im) +
                     tile_bytes(trans.format) + 2 * wt * tile_bytes(at.compute.output);
  launch_program(dev, op, program_key(at), {&x, &cos, &sin, &trans}, x.shape, at.compute.output, cb);
  return tt_rotary_llama(x, cos, sin, trans, at.is_decode_mode ? RotaryMode::Decode : RotaryMode::Prefill, at.compute,
                         dev.exec());
}

}  // namespace mha::ttsim
