// ttnn.exp and ttnn.reciprocal: TT-NN's eltwise_sfpu kernel per tile.
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/unary/unary.h"

namespace mha::ttsim {

namespace {

TileTensor run_unary_op(OpCall& c, UnaryOp u) {
  // ttnn.exp's fast_and_approx_mode and ttnn.reciprocal default to false;
  // fp32 accumulation is on for a float32 input or output.
  UnaryAttributes at;
  at.op = u;
  at.compute.math_approx_mode = c.opt.math_approx_mode.value_or(false);
  at.compute.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(c.in[0].format == DataFormat::Float32 ||
                                                                c.out_format == DataFormat::Float32);
  at.compute.output = c.out_format;
  apply_device(at.compute, c.opt);
  at.compute.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  c.info["compute_kernel_config"] = {{"math_approx_mode", at.compute.math_approx_mode},
                                     {"fp32_dest_acc_en", at.compute.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  return run_unary(c.dev, c.program, c.in[0], at);
}

TileTensor run_exp(OpCall& c) { return run_unary_op(c, UnaryOp::Exp); }
TileTensor run_reciprocal(OpCall& c) { return run_unary_op(c, UnaryOp::Reciprocal); }

constexpr const char* kUnaryDefaults =
    "approx off (fast_and_approx_mode=False); fp32 Dst on for a float32 input or output, which then goes to Dst "
    "whole (UnpackToDestFp32)";

}  // namespace

extern const TtOpDesc kOpExp = {"exp", "A", "ttnn.exp: copy_tile to Dst, SFPU exp, pack", kUnaryDefaults, 1, 1,
                                false, false, {}, nullptr, nullptr, run_exp};

extern const TtOpDesc kOpReciprocal = {"reciprocal", "A", "ttnn.reciprocal: copy_tile to Dst, SFPU reciprocal, pack",
                                       kUnaryDefaults, 1, 1, false, false, {}, nullptr, nullptr, run_reciprocal};

}  // namespace mha::ttsim
