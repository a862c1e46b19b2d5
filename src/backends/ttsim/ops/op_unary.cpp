// ttnn.exp and ttnn.reciprocal: TT-NN's eltwise_sfpu kernel per tile.
#include "backends/ttsim/op_table.h"
#include "ttsim/unary.h"

namespace mha::ttsim {

namespace {

TileTensor run_unary(OpCall& c, UnaryOp u) {
  // ttnn.exp's fast_and_approx_mode and ttnn.reciprocal default to false;
  // fp32 accumulation is on for a float32 input or output.
  const bool approx = c.opt.math_approx_mode.value_or(false);
  const bool fp32 = c.opt.fp32_dest_acc_en.value_or(c.in[0].format == DataFormat::Float32 ||
                                                    c.out_format == DataFormat::Float32);
  const TileTensor& a = c.in[0];
  TtDevice::OpTimer timer(c.dev, c.program);
  c.dev.program(c.program, std::string("approx=") + (approx ? "1" : "0") + ",fp32_acc=" + (fp32 ? "1" : "0") +
                               ",out=" + format_name(c.out_format), {&a});
  c.dev.check_memory_cb(c.program, {&a}, a.shape, c.out_format, 2 * (tile_bytes(a.format) + tile_bytes(c.out_format)));
  TileTensor out = make_tile_tensor(a.shape, c.out_format);
  tt_unary(a, u, out, approx, fp32, c.opt.bfp8_pack_precise.value_or(false), c.dev.exec(), c.opt.device.arch);
  c.info["compute_kernel_config"] = {{"math_approx_mode", approx}, {"fp32_dest_acc_en", fp32}};
  return out;
}

TileTensor run_exp(OpCall& c) { return run_unary(c, UnaryOp::Exp); }
TileTensor run_reciprocal(OpCall& c) { return run_unary(c, UnaryOp::Reciprocal); }

constexpr const char* kUnaryDefaults =
    "approx off (fast_and_approx_mode=False); fp32 Dst on for a float32 input or output, which then goes to Dst "
    "whole (UnpackToDestFp32)";

}  // namespace

extern const TtOpDesc kOpExp = {"exp", "A", "ttnn.exp: copy_tile to Dst, SFPU exp, pack", kUnaryDefaults, 1, 1,
                                false, false, {}, nullptr, nullptr, run_exp};

extern const TtOpDesc kOpReciprocal = {"reciprocal", "A", "ttnn.reciprocal: copy_tile to Dst, SFPU reciprocal, pack",
                                       kUnaryDefaults, 1, 1, false, false, {}, nullptr, nullptr, run_reciprocal};

}  // namespace mha::ttsim
