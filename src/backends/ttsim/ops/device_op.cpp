#include "backends/ttsim/ops/device_op.h"

#include "util/error.h"

namespace mha::ttsim {

void check_cb_budget(const TtDevice& dev, const std::string& op, int64_t cb_bytes, const std::string& hint) {
  const DeviceInfo& d = dev.options().device;
  if (cb_bytes <= d.l1_bytes) return;
  throw DeviceOutOfMemory(op + ": the program's circular buffers need " + std::to_string(cb_bytes) +
                          " B per core, over " + std::to_string(d.l1_bytes) + " B of L1 on " + d.name +
                          (hint.empty() ? "" : " (" + hint + ")"));
}

void launch_program(TtDevice& dev, const std::string& op, const std::string& key,
                    const std::vector<const TileTensor*>& inputs, const Shape& out_shape, DataFormat out_format,
                    int64_t cb_bytes, const std::string& cb_hint) {
  check_cb_budget(dev, op, cb_bytes, cb_hint);
  dev.program(op, key, inputs);
  dev.check_memory_cb(op, inputs, out_shape, out_format, cb_bytes);
}

}  // namespace mha::ttsim
