// `mha op rms-norm X [WEIGHT]`: ttnn.rms_norm over X's last dim, the weight
// as the model holds it (bfloat16, any shape with one value per column).
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/rms_norm/rms_norm.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

RmsNormAttributes rms_norm_params(const nlohmann::ordered_json& p) {
  RmsNormAttributes a;
  fields::parse_into(a, p, "op options", "rms-norm option");
  return a;
}

void check_rms_norm(const OpCheck& c) {
  rms_norm_params(c.params);
  const int64_t W = c.inputs[0].shape().empty() ? 1 : c.inputs[0].shape().back();
  if (c.inputs.size() == 2 && c.inputs[1].numel() != W)
    throw InputError(c.names[1] + ": rms-norm's WEIGHT needs one value per column of X (" + std::to_string(W) +
                     "), found shape " + shape_str(c.inputs[1].shape()));
}

// The weight, whatever its file shape, as one row.
Shape weight_row(int i, const Shape& s) {
  if (i == 0) return s;
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return {1, n};
}

TileTensor run_rms_norm_op(OpCall& c) {
  RmsNormAttributes at = rms_norm_params(c.params);
  ComputeConfig& cfg = at.compute;
  cfg.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi4);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  cfg.arch = c.opt.device.arch;
  cfg.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  cfg.output = c.out_format;
  std::vector<float> gamma;
  if (c.in.size() == 2) {
    if (block_float(c.in[1].format))
      throw InputError("rms-norm: WEIGHT is a ROW_MAJOR tensor, which has no block-float dtype (expected bfloat16 "
                       "or float32, found " + std::string(format_name(c.in[1].format)) + ")");
    // What the unpacker puts in SrcB: a float32 weight cut to TF32 (fp32
    // Dst) or bfloat16.
    for (int64_t i = 0; i < c.in[1].pcols; ++i)
      gamma.push_back(unpack_to_src(c.in[1].matrix(0)[i], c.in[1].format, cfg.fp32_dest_acc_en));
  }
  TileTensor out = run_rms_norm(c.dev, c.in[0], gamma.empty() ? nullptr : &gamma, at);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"math_approx_mode", cfg.math_approx_mode},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  c.info["kernel"] = "layernorm.cpp (RMSNORM) at tt-metal 00af75a2; sqrt_tile at tt-llk 07e5e930";
  return out;
}

}  // namespace

extern const TtOpDesc kOpRmsNorm = {
    "rms-norm", "X [WEIGHT]",
    "ttnn.rms_norm(X, epsilon, weight=WEIGHT): x / sqrt(mean(x^2) + eps) * w over X's last dim, interleaved "
    "(layernorm.cpp's RMS path: x^2, row reduce against 1/W, add eps, sqrt, reciprocal, two broadcast multiplies)",
    "HiFi4, approx on, fp32 Dst off; epsilon 1e-12", 1, 2, false, false, op_params_of(RmsNormAttributes{}),
    check_rms_norm, weight_row, run_rms_norm_op};

}  // namespace mha::ttsim
