// ttnn.softmax(dim=-1).
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/softmax/softmax.h"
#include "backends/ttsim/ops/softmax/softmax_kernel.h"

namespace mha::ttsim {

namespace {

TileTensor run_softmax_op(OpCall& c) {
  SoftmaxAttributes at{softmax_default_config()};
  ComputeConfig& cfg = at.compute;
  cfg.math_fidelity = c.opt.math_fidelity.value_or(cfg.math_fidelity);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(cfg.math_approx_mode);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(cfg.fp32_dest_acc_en);
  apply_device(cfg, c.opt);
  cfg.numerics = c.opt.numerics;
  cfg.output = c.out_format;
  cfg.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", cfg.fp32_dest_acc_en},
                                     {"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"math_approx_mode", cfg.math_approx_mode}};
  c.info["attributes"] = fields::json_of(at);
  return run_softmax(c.dev, c.program, c.in[0], at);
}

}  // namespace

extern const TtOpDesc kOpSoftmax = {
    "softmax", "A", "ttnn.softmax(dim=-1), numeric_stable=false; the reciprocal per tt_metal: 1/ln2-seeded (2024), quadratic (latest)",
    "HiFi4, approx on, fp32 Dst off", 1, 1, false, false, {}, nullptr, nullptr, run_softmax_op};

}  // namespace mha::ttsim
