// `mha op rotary-llama`: ttnn.experimental.rotary_embedding_llama with
// TT-NN's defaults for the op; TRANS built as get_rot_transformation_mat
// builds it when omitted.
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

RotaryAttributes rotary_params(const nlohmann::ordered_json& p) {
  RotaryAttributes a;
  fields::parse_into(a, p, "op options", "rotary-llama option");
  return a;
}

// The rotary ops' compute config: TT-NN's defaults (HiFi4, fp32 Dst off)
// under the call's flags and device.
void rotary_compute(const OpCall& c, ComputeConfig& cfg) {
  cfg.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi4);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  apply_device(cfg, c.opt);
  cfg.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  cfg.output = c.out_format;
}

void check_rotary(const OpCheck& c) {
  require_4d(c, "rotary-llama");
  rotary_params(c.params);
}

TileTensor run_rotary_op(OpCall& c) {
  RotaryAttributes at = rotary_params(c.params);
  ComputeConfig& cfg = at.compute;
  rotary_compute(c, cfg);
  const TileTensor trans = c.in.size() == 4 ? c.in[3] : rotary_llama_trans_mat(c.in[0].format);
  TileTensor out = run_rotary_llama(c.dev, c.in[0], c.in[1], c.in[2], trans, at);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  c.info["trans_mat"] = c.in.size() == 4 ? "input" : "built as get_rot_transformation_mat builds it";
  return out;
}

void check_rotary_fused(const OpCheck& c) { require_4d(c, "rotary-llama-fused-qk"); }

// Decode only (the fused op has no prefill mode): is_decode_mode is fixed.
TileTensor run_rotary_fused_op(OpCall& c) {
  if (c.params.contains("is_decode_mode"))
    throw InputError("rotary-llama-fused-qk: is_decode_mode does not apply (the fused op is decode only)");
  RotaryAttributes at;
  at.is_decode_mode = true;
  ComputeConfig& cfg = at.compute;
  rotary_compute(c, cfg);
  const TileTensor trans = c.in.size() == 5 ? c.in[4] : rotary_llama_trans_mat(c.in[0].format);
  TileTensor out = run_rotary_llama_fused_qk(c.dev, c.in[0], c.in[1], c.in[2], c.in[3], trans, at);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  return out;
}

}  // namespace

extern const TtOpDesc kOpRotaryLlamaFusedQk = {
    "rotary-llama-fused-qk", "Q K COS SIN [TRANS]",
    "ttnn.experimental.rotary_embedding_llama_fused_qk: rotary_embedding_llama's decode on Q [1, b, nh, dh] and "
    "K [1, b, nkv, dh] (one dtype) in one program, COS/SIN [1, b, 1, dh]; writes both, heads concatenated: "
    "[1, b, nh + nkv, dh]",
    "HiFi4, fp32 Dst off", 4, 5, false, false, {}, check_rotary_fused, nullptr, run_rotary_fused_op};

extern const TtOpDesc kOpRotaryLlama = {
    "rotary-llama", "X COS SIN [TRANS]",
    "ttnn.experimental.rotary_embedding_llama: X*COS + (X@TRANS)*SIN per 32-column tile; prefill X [b, nh, S, dh] "
    "with COS/SIN [1, 1, S, dh]; decode (is_decode_mode=true) X [1, b, nh, dh] with COS/SIN [1, b, 1, dh]; TRANS "
    "[1, 1, 32, 32], built as TT-NN's get_rot_transformation_mat when omitted",
    "HiFi4, fp32 Dst off", 3, 4, false, false, op_params_of(RotaryAttributes{}), check_rotary, nullptr, run_rotary_op};

}  // namespace mha::ttsim
