#include "backends/ttsim/ops/data_movement/data_movement.h"

#include <algorithm>

#include "ttsim/packer.h"

namespace mha::ttsim {

// Input and output, four tiles each (reader and writer double-buffered).
TileTensor run_data_movement(TtDevice& dev, const std::string& op, const TileTensor& in,
                             const std::vector<float>& values, const DataMovementAttributes& at) {
  TtDevice::OpTimer timer(dev, op);
  const DataFormat out_fmt = at.output;
  launch_program(dev, op, program_key(at), {&in}, at.shape, out_fmt,
                 4 * (tile_bytes(in.format) + tile_bytes(out_fmt)));
  TileTensor t = make_tile_tensor(at.shape, out_fmt);
  // Each matrix on the pool: its rows copied, then (block float) repacked.
  const bool repack = bfp_magnitude_bits(out_fmt) > 0;
  dev.exec().parallel_for(t.batch, [&](int64_t b, int) {
    float* m = t.matrix(b);
    for (int64_t r = 0; r < t.rows; ++r) std::copy_n(values.data() + (b * t.rows + r) * t.cols, t.cols, m + r * t.pcols);
    if (repack)
      for (int64_t r = 0; r < t.prows; ++r)
        pack_from_dst(m + r * t.pcols, m + r * t.pcols, t.pcols, out_fmt, /*fp32_dest=*/false, /*bfp8_pack_precise=*/false);
  });
  return t;
}

TileTensor run_typecast(TtDevice& dev, const TileTensor& x, DataFormat out) {
  if (x.format == out) return x;
  return run_data_movement(dev, "ttnn.typecast", x, to_row_major(x), DataMovementAttributes{out, x.shape});
}

TileTensor run_head_movement(TtDevice& dev, const std::string& op, const std::string& key, const TileTensor& in,
                             TileTensor t) {
  dev.program(op, key, {&in});
  TtDevice::OpTimer timer(dev, op);
  dev.check_memory(op, {&in}, t.shape, t.format);
  return t;
}

}  // namespace mha::ttsim
