// ttnn.transformer.scaled_dot_product_attention (prefill): Q K V [MASK] in
// TT-NN's layouts, the program config and causal flag as --option keys.
#include "backends/ttsim/op_table.h"
#include "ttsim/sdpa.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// The op's own keys (SDPAProgramConfig, is_causal, scale, sliding window,
// attention sink) over TT-NN's defaults: chunks of 32, exp approx on, causal.
SdpaConfig sdpa_params(const nlohmann::ordered_json& p) {
  SdpaConfig c;
  c.q_chunk_size = param_int(p, "q_chunk_size", c.q_chunk_size);
  c.k_chunk_size = param_int(p, "k_chunk_size", c.k_chunk_size);
  c.exp_approx_mode = param_bool(p, "exp_approx_mode", c.exp_approx_mode);
  c.is_causal = param_bool(p, "is_causal", c.is_causal);
  if (auto s = param_number(p, "scale")) c.scale = static_cast<float>(*s);
  c.sliding_window_size = param_int(p, "sliding_window_size", 0);
  c.attention_sink = param_bf16_values(p, "attention_sink", "one per query head");
  return c;
}

void check_sdpa(const OpCheck& c) {
  const SdpaConfig cfg = sdpa_params(c.params);
  const Shape* mask = c.inputs.size() == 4 ? &c.inputs[3].shape() : nullptr;
  const std::string p = sdpa_problem(c.inputs[0].shape(), c.inputs[1].shape(), c.inputs[2].shape(), mask, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
}

// Circular buffers per core as the program factory sizes them (Q chunk, K
// and V chunks double-buffered, mask, qk, out_im, out_acc, out, statistics).
int64_t sdpa_cb_bytes(const OpCall& c, const SdpaConfig& cfg) {
  const int64_t sq = cfg.q_chunk_size / 32, sk = cfg.k_chunk_size / 32, dht = c.in[0].pcols / 32;
  const int64_t bf16 = tile_bytes(DataFormat::Bfloat16);
  int64_t b = sq * dht * tile_bytes(c.in[0].format) * 2 + sk * dht * (tile_bytes(c.in[1].format) + tile_bytes(c.in[2].format)) * 2;
  b += sq * sk * (c.in.size() == 4 ? tile_bytes(c.in[3].format) : tile_bytes(DataFormat::Bfp4_b));
  b += (sq * sk + 2 * sq * dht + 6 * sq + 2) * bf16 + sq * dht * tile_bytes(c.out_format);
  return b;
}

TileTensor run_sdpa(OpCall& c) {
  SdpaConfig cfg = sdpa_params(c.params);
  for (size_t i = 0; i < c.in.size(); ++i)
    if (c.in[i].format == DataFormat::Float32)
      throw InputError(std::string("sdpa: input ") + std::to_string(i) +
                       " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b");
  // TT-NN's SDPA compute kernel config defaults: HiFi2, approx on, 16-bit Dst.
  cfg.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi2);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  cfg.arch = c.opt.device.arch;
  cfg.output = c.out_format;
  cfg.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  const bool packer_l1_acc = c.opt.packer_l1_acc.value_or(false);
  std::vector<const TileTensor*> ins;
  for (const TileTensor& t : c.in) ins.push_back(&t);
  const TileTensor* mask = c.in.size() == 4 ? &c.in[3] : nullptr;
  const int64_t cb = sdpa_cb_bytes(c, cfg);
  if (cb > c.opt.device.l1_bytes)
    throw DeviceOutOfMemory("sdpa: the program's circular buffers need " + std::to_string(cb) + " B per core, over " +
                            std::to_string(c.opt.device.l1_bytes) + " B of L1 on " + c.opt.device.name +
                            " (smaller q_chunk_size / k_chunk_size fit)");
  TtDevice::OpTimer timer(c.dev, c.program);
  c.dev.program(c.program,
                "q_chunk=" + std::to_string(cfg.q_chunk_size) + ",k_chunk=" + std::to_string(cfg.k_chunk_size) +
                    ",exp_approx=" + (cfg.exp_approx_mode ? "1" : "0") + ",causal=" + (cfg.is_causal ? "1" : "0") +
                    ",window=" + std::to_string(cfg.sliding_window_size) + ",sink=" + (cfg.attention_sink.empty() ? "0" : "1") +
                    ",fid=" + fidelity_name(cfg.math_fidelity) + ",fp32=" + (cfg.fp32_dest_acc_en ? "1" : "0") +
                    ",approx=" + (cfg.math_approx_mode ? "1" : "0") + ",out=" + format_name(cfg.output),
                ins);
  c.dev.check_memory_cb(c.program, ins, c.in[0].shape, cfg.output, cb);
  TileTensor out;
  tt_sdpa(c.in[0], c.in[1], c.in[2], mask, out, cfg, c.dev.exec());
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"math_approx_mode", cfg.math_approx_mode},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en},
                                     {"packer_l1_acc", packer_l1_acc}};
  c.info["program_config"] = {{"q_chunk_size", cfg.q_chunk_size},
                              {"k_chunk_size", cfg.k_chunk_size},
                              {"exp_approx_mode", cfg.exp_approx_mode}};
  c.info["is_causal"] = cfg.is_causal;
  c.info["sliding_window_size"] = cfg.sliding_window_size;
  if (!cfg.attention_sink.empty()) c.info["attention_sink_bf16"] = cfg.attention_sink;
  c.info["scale_bf16"] = sdpa_scale_bf16(cfg, c.in[0].cols);
  return out;
}

}  // namespace

extern const TtOpDesc kOpSdpa = {
    "sdpa", "Q K V [MASK]",
    "ttnn.transformer.scaled_dot_product_attention: Q (b, nqh, s, dh), K and V (b, nkv, s, dh), MASK (b, 1, s, s) "
    "with is_causal=false; FlashAttention-2 over q and k chunks as tt-metal's kernel computes it",
    "HiFi2, math_approx_mode on, fp32 Dst off, packer_l1_acc off; chunks of 32; causal; scale 1/sqrt(dh)", 3, 4,
    false, false,
    {{"q_chunk_size", "rows of Q per chunk, a multiple of 32 dividing s (default 32)"},
     {"k_chunk_size", "keys per chunk, a multiple of 32 dividing s (default 32)"},
     {"exp_approx_mode", "true/false: the exp of the rescale factor exp(m_old - m_new) (default true)"},
     {"is_causal", "true/false (default true; a MASK needs false)"},
     {"scale", "the score scale (default 1/sqrt(dh)), truncated to bf16 as the reader does"},
     {"sliding_window_size", "keys per query window (default 0: none); causal: [q-W+1, q], non-causal: [q-W/2, q+W/2]"},
     {"attention_sink", "[s0, s1, ...]: one logit per query head, unscaled, held as bf16 (default none)"}},
    check_sdpa, nullptr, run_sdpa};

}  // namespace mha::ttsim
