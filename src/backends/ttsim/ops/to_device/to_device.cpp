// to-device: ttnn.from_torch to --dtype, then ttnn.to_torch (the host
// quantisation alone; no program runs).
#include "backends/ttsim/ops/op_table.h"

namespace mha::ttsim {

namespace {
TileTensor run_to_device(OpCall& c) { return c.in[0]; }
}  // namespace

extern const TtOpDesc kOpToDevice = {"to-device", "A", "ttnn.from_torch to --dtype (TILE layout), then ttnn.to_torch",
                                     "no compute config", 1, 1, false, true, {}, nullptr, nullptr, run_to_device};

}  // namespace mha::ttsim
