#pragma once
// One TT-NN op on the emulated device, from host tensors (what `mha op`
// runs): inputs converted as ttnn.from_torch converts them (dtype, TILE
// layout), the op run with TT-NN's defaults for that op under the given
// backend options, the result read back as ttnn.to_torch returns it.
// Kernel writers use it to check one op's numerics without the device.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/op_table.h"
#include "tensor/tensor.h"
#include "ttsim/formats.h"

namespace mha::ttsim {

// The ops themselves (names, operands, defaults, run) are the descriptors
// of op_table.h.

// An op's output kept on the device for the next op (mha.ttnn's device
// tensors), rather than read back to host values and converted again.
struct DeviceTiles {
  TileTensor tiles;  // padding zero, as after ttnn.from_torch

  // Converting its values on the host (ttnn.from_torch) gives these tiles
  // bit for bit, so an op takes them as is; else (a NaN the host rounding
  // makes 0xffff, a block-float row the host would encode otherwise) an op
  // converts its values. Found on first use (the host rounding applied to
  // the tiles, compared), once: many outputs never reach another op.
  bool as_host() const;

 private:
  mutable std::atomic<int> as_host_{-1};  // -1: not found yet (ops may run on several threads)
};

// t kept on the device: padding zeroed (no op reads it as data; each op sees
// zero padding, as after ttnn.from_torch).
std::shared_ptr<const DeviceTiles> keep_on_device(TileTensor t);

struct OpInput {
  std::string name;                 // for messages and the report (the file spec)
  Tensor tensor;                    // any floating dtype; converted to float32 first
  std::optional<DataFormat> dtype;  // unset: the options' dtype, else bfloat16
  // Set: the input is on the device already and `tensor` is not read. Taken
  // as is when as_host() and its format and shape are the ones the op tiles
  // the input with, else converted from its values as `tensor` would be.
  std::shared_ptr<const DeviceTiles> tiles = nullptr;
};

struct OpRequest {
  std::string op;  // a name from tt_ops()
  std::vector<OpInput> inputs;
  // The tt-sim backend object of a config (device, dtype, math_fidelity,
  // fp32_dest_acc_en, math_approx_mode, memory_config, core_grid, threads,
  // kernels, ...), parsed by parse_tt_options; unset keys take the op's
  // TT-NN defaults. Keys the op declares as its own params (sdpa's
  // q_chunk_size, ...) go to the op instead.
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  std::optional<DataFormat> output_dtype;  // unset: input 0's dtype
  std::optional<double> scalar;            // multiply: ttnn.multiply(a, float)
  bool keep_output = false;                // the output stays on the device (OpResult::tiles)
};

struct OpResult {
  Tensor output;       // float32, the op's logical shape: the device values exactly
  std::shared_ptr<const DeviceTiles> tiles;  // keep_output: the output instead of `output`
  nlohmann::json info; // op, inputs, output, compute config, memory, program cache
};

// Throws InputError when `op` does not take `inputs` tensors (with or
// without a --scalar): the check run_tt_op makes first, callable before
// any file is read.
// InputError for an unknown op name too.
void check_op_inputs(const std::string& op, int inputs, bool scalar);

// Throws InputError (one line: what, where, expected vs found) for a wrong
// number of inputs, shapes that do not fit the op, dtypes or options the op
// does not take; DeviceOutOfMemory when the op does not fit the device.
OpResult run_tt_op(const OpRequest& request);

}  // namespace mha::ttsim
