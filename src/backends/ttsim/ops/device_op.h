#pragma once
// One TT-NN op call on the emulated device, the frame every op in ops/<op>/
// runs its kernel in, as tt-metal's device operations run: the program's
// circular buffers checked against one core's L1, the program looked up in
// the device's program cache (keyed on the op name, the attributes' fields
// (util/fields.h) and every input), the op's buffers checked against the
// device's memory, and the call timed.
//
// An op folder holds: its attributes struct (the compute config embedded,
// one field list), its validate (TT-NN's checks, one line each), its
// circular-buffer budget, its program choice and its kernel. `mha op` (the
// op table), the seed pipelines and the SDPA pipelines all call the op's
// one entry point.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/ttsim/ttsim_device.h"
#include "util/fields.h"

namespace mha::ttsim {

// Refuses (DeviceOutOfMemory) a program whose circular buffers need more
// than one core's L1: "OP: the program's circular buffers need N B per
// core, over L B of L1 on DEVICE (HINT)".
void check_cb_budget(const TtDevice& dev, const std::string& op, int64_t cb_bytes, const std::string& hint = "");

// The frame before an op's kernel runs: the CB budget, the program lookup
// (key: `key`), the memory check. Muted inner steps of a fused op skip the
// last two (TtDevice).
void launch_program(TtDevice& dev, const std::string& op, const std::string& key,
                    const std::vector<const TileTensor*>& inputs, const Shape& out_shape, DataFormat out_format,
                    int64_t cb_bytes, const std::string& cb_hint = "");

// The program-cache key of an attributes struct: its fields (not the
// runtime ones), "name=value,...".
template <class Attrs>
std::string program_key(const Attrs& a) {
  return fields::key_of(a);
}

}  // namespace mha::ttsim
