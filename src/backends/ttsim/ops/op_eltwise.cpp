// ttnn.add and ttnn.multiply (FPU ELWADD / ELWMUL with TT-NN's broadcasts).
#include "backends/ttsim/op_table.h"
#include "backends/ttsim/ttsim_ops.h"
#include "ttsim/eltwise.h"
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

TileTensor run_add(OpCall& c) {
  const bool fp32 = eltwise_fp32(c);
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", fp32}};
  return op_add(c.dev, c.program, c.in[0], c.in[1], c.out_format, fp32, c.opt.bfp8_pack_precise.value_or(false));
}

TileTensor run_multiply(OpCall& c) {
  const bool fp32 = eltwise_fp32(c), precise = c.opt.bfp8_pack_precise.value_or(false);
  const MathFidelity fid = c.opt.math_fidelity.value_or(MathFidelity::HiFi4);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(fid)}, {"fp32_dest_acc_en", fp32}};
  if (c.scalar) {
    c.info["scalar"] = *c.scalar;
    c.info["scalar_bf16"] = host_round_bf16(static_cast<float>(*c.scalar));
    return op_mul_scalar(c.dev, c.program, c.in[0], static_cast<float>(*c.scalar), c.out_format, fid, fp32, precise);
  }
  const TileTensor &a = c.in[0], &b = c.in[1];
  TtDevice::OpTimer timer(c.dev, c.program);
  c.dev.program(c.program, std::string(fidelity_name(fid)) + ",out=" + format_name(c.out_format), {&a, &b});
  c.dev.check_memory_cb(c.program, {&a, &b}, a.shape, c.out_format,
                        2 * (tile_bytes(a.format) + tile_bytes(b.format) + tile_bytes(c.out_format)));
  TileTensor out = make_tile_tensor(a.shape, c.out_format);
  tt_mul(a, b, out, fid, fp32, precise, c.dev.exec(), c.opt.device.arch);
  return out;
}

}  // namespace

extern const TtOpDesc kOpAdd = {
    "add", "A B", "ttnn.add: ELWADD, B broadcast onto A (one row, leading dims 1)",
    "fp32 Dst on for a float32 input or output", 2, 2, false, false, {}, check_add, nullptr, run_add};

extern const TtOpDesc kOpMultiply = {
    "multiply", "A B, or A with --scalar S",
    "ttnn.multiply: ELWMUL (A in SrcA, B broadcast as add), or A times S rounded to bf16",
    "HiFi4; fp32 Dst as add", 1, 2, true, false, {}, check_multiply, nullptr, run_multiply};

}  // namespace mha::ttsim
