// ttnn.add and ttnn.multiply (FPU ELWADD / ELWMUL with TT-NN's broadcasts).
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/eltwise/eltwise.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

void check_binary(const char* name, const OpCheck& c) {
  if (c.inputs.size() != 2) return;
  const std::string p = broadcast_problem(c.inputs[0].shape(), c.inputs[1].shape());
  if (!p.empty()) throw InputError(std::string(name) + ": " + p);
}
void check_add(const OpCheck& c) { check_binary("add", c); }
void check_multiply(const OpCheck& c) { check_binary("multiply", c); }

// TT-NN turns fp32 accumulation on for a float32 input or output
// (preserve_fp32_precision).
bool eltwise_fp32(const OpCall& c) {
  return c.opt.fp32_dest_acc_en.value_or(c.in[0].format == DataFormat::Float32 ||
                                         c.out_format == DataFormat::Float32);
}

TileTensor run_add_op(OpCall& c) {
  EltwiseAttributes at =
      eltwise_attributes(c.out_format, eltwise_fp32(c), c.opt.bfp8_pack_precise.value_or(false), c.opt.device.arch);
  apply_device(at.compute, c.opt);
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", at.compute.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  return run_add(c.dev, c.program, c.in[0], c.in[1], at);
}

TileTensor run_multiply_op(OpCall& c) {
  EltwiseAttributes at = eltwise_attributes(c.out_format, eltwise_fp32(c), c.opt.bfp8_pack_precise.value_or(false),
                                            c.opt.device.arch, c.opt.math_fidelity.value_or(MathFidelity::HiFi4));
  apply_device(at.compute, c.opt);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(at.compute.math_fidelity)},
                                     {"fp32_dest_acc_en", at.compute.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  if (!c.scalar) return run_multiply(c.dev, c.program, c.in[0], c.in[1], at);
  c.info["scalar"] = *c.scalar;
  c.info["scalar_bf16"] = host_round_bf16(static_cast<float>(*c.scalar));
  return run_multiply_scalar(c.dev, c.program, c.in[0], static_cast<float>(*c.scalar), at);
}

}  // namespace

extern const TtOpDesc kOpAdd = {
    "add", "A B", "ttnn.add: ELWADD, B broadcast onto A (one row, leading dims 1)",
    "fp32 Dst on for a float32 input or output", 2, 2, false, false, {}, check_add, nullptr, run_add_op};

extern const TtOpDesc kOpMultiply = {
    "multiply", "A B, or A with --scalar S",
    "ttnn.multiply: ELWMUL (A in SrcA, B broadcast as add), or A times S rounded to bf16",
    "HiFi4; fp32 Dst as add", 1, 2, true, false, {}, check_multiply, nullptr, run_multiply_op};

}  // namespace mha::ttsim
