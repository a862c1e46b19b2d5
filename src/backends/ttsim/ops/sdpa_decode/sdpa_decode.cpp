// `mha op sdpa-decode`: ttnn.transformer.scaled_dot_product_attention_decode
// (and the paged variant) from the op's params (positions, page table,
// SdpaDecodeConfig's keys) over TT-NN's defaults.
#include <cmath>
#include <string>
#include <vector>

#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// The op's params: the runtime arguments, then the attributes' own keys;
// flash-mla-decode's (Mla = true) TT-NN's head_dim_v first.
template <bool Mla>
struct DecodeParams {
  std::vector<int64_t> cur_pos;
  std::vector<std::vector<int64_t>> page_table;
  SdpaDecodeConfig cfg;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("cur_pos", cur_pos, "one position per user (--cur-pos P,...), required unless is_causal=false", flag);
    v("page_table", page_table, "the paged variant's [b][blocks] block ids (--page-table FILE)", flag);
    if (Mla)
      v("head_dim_v", cfg.head_dim_v,
        "V's head dim, required (no default): V is K's first head_dim_v columns, a multiple of 32");
    cfg.fields(v);
  }
};
using SdpaDecodeParams = DecodeParams<false>;
using FlashMlaDecodeParams = DecodeParams<true>;

// Parsed and checked; the sink held as bf16 as from_torch converts it.
template <bool Mla>
DecodeParams<Mla> decode_params(const nlohmann::ordered_json& p) {
  const char* op = Mla ? "flash-mla-decode" : "sdpa-decode";
  if (Mla && !p.contains("head_dim_v"))
    throw InputError(std::string(op) + ": --option head_dim_v=N (V's head dim, K's first N columns) is required");
  DecodeParams<Mla> d;
  fields::parse_into(d, p, "op options", Mla ? "flash-mla-decode option" : "sdpa-decode option");
  SdpaDecodeConfig& cfg = d.cfg;
  const int64_t k = cfg.k_chunk_size;
  if (k < 0 || (k > 0 && (k % 32 != 0 || (k & (k - 1)) != 0)))
    throw InputError("op options.k_chunk_size: expected 0 (TT-NN's default) or a power of 2 that is a multiple of 32, "
                     "found " + std::to_string(k));
  if (p.contains("max_cores_per_head_batch") && cfg.max_cores_per_head_batch < 1)
    throw InputError("op options.max_cores_per_head_batch: expected a positive integer");
  if (cfg.sliding_window_size < 0)
    throw InputError("op options.sliding_window_size: expected 0 (none) or a positive number of positions, found " +
                     std::to_string(cfg.sliding_window_size));
  if (cfg.scale && !(*cfg.scale > 0))
    throw InputError("op options.scale: expected a positive number, found " + std::to_string(*cfg.scale));
  for (float& s : cfg.attention_sink) s = host_round_bf16(s);
  if (!d.cur_pos.empty()) check_positions(d.cur_pos, false);
  if (!d.page_table.empty()) check_page_table(d.page_table);
  if (Mla && (cfg.head_dim_v < 1 || cfg.head_dim_v % 32 != 0))
    throw InputError("op options.head_dim_v: expected a positive multiple of 32 (the reader takes V as whole tiles "
                     "of K), found " + std::to_string(cfg.head_dim_v));
  return d;
}

template <bool Mla>
void check_decode(const OpCheck& c) {
  const char* op = Mla ? "flash-mla-decode" : "sdpa-decode";
  require_4d(c, op);
  const DecodeParams<Mla> d = decode_params<Mla>(c.params);
  if (d.cfg.is_causal && !c.params.contains("cur_pos"))
    throw InputError(std::string(op) + ": --cur-pos P,... (the cur_pos param) is required: one position per user");
}

// Both ops: sdpa-decode's Q K V, flash-mla-decode's Q K (V read from K).
template <bool Mla>
TileTensor run_decode_op(OpCall& c) {
  DecodeParams<Mla> d = decode_params<Mla>(c.params);
  SdpaDecodeConfig& cfg = d.cfg;
  cfg.compute.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi2);
  cfg.compute.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.compute.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  apply_device(cfg.compute, c.opt);
  const Grid g = c.opt.core_grid.value_or(Grid{c.opt.device.grid_y, c.opt.device.grid_x});
  cfg.grid_y = g.y;
  cfg.grid_x = g.x;
  cfg.compute.output = c.out_format;
  const auto* pt = d.page_table.empty() ? nullptr : &d.page_table;
  const TileTensor* mask = !Mla && c.in.size() > 3 ? &c.in[3] : nullptr;
  TileTensor out = run_sdpa_decode(c.dev, c.in[0], c.in[1], Mla ? c.in[1] : c.in[2], mask, d.cur_pos, pt, cfg);
  const int64_t block = pt && cfg.compute.tt_metal == TtMetal::Latest ? c.in[1].prows : c.in[1].shape[2];
  const int64_t S = pt ? block * static_cast<int64_t>((*pt)[0].size()) : c.in[1].shape[2];
  const int64_t pos0 = !cfg.is_causal ? S - 1 : pt ? sdpa_decode_padded_position(d.cur_pos[0], c.in[1].shape[2])
                                                     : d.cur_pos[0];
  const SdpaDecodeGrid dg = sdpa_decode_grid(cfg, c.in[0].shape[1], c.in[1].shape[1]);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.compute.math_fidelity)},
                                     {"math_approx_mode", cfg.compute.math_approx_mode},
                                     {"fp32_dest_acc_en", cfg.compute.fp32_dest_acc_en}};
  c.info["program_config"] = {{"compute_with_storage_grid_size", {cfg.grid_x, cfg.grid_y}},
                              {"k_chunk_size", sdpa_decode_k_chunk_size(cfg, S, pt != nullptr, pos0)},
                              {"exp_approx_mode", cfg.exp_approx_mode},
                              {"cores_per_head", dg.cores_per_head}};
  c.info["attributes"] = fields::json_of(cfg);
  if (Mla) c.info["head_dim_v"] = cfg.head_dim_v;
  c.info["sliding_window_size"] = cfg.sliding_window_size;
  if (!cfg.attention_sink.empty()) c.info["attention_sink_bf16"] = cfg.attention_sink;
  return out;
}

}  // namespace

extern const TtOpDesc kOpSdpaDecode = {
    "sdpa-decode", "Q K V [MASK]",
    "ttnn.transformer.scaled_dot_product_attention_decode (Flash-Decode): Q [1, b, nh, dh], K/V caches "
    "[b, nkv, S, dh] (paged: [blocks, nkv, block_size, dh] with --page-table), attention over 0..cur_pos per user (tt_metal latest: is_causal=false over the whole cache, with an optional "
    "MASK [b, 1, nh, S]); "
    "K/V chunks dealt to the grid's cores, partials merged on the reduction tree",
    "HiFi2, approx on, fp32 Dst off, exp_approx_mode on, k_chunk_size = largest power of 2 dividing S up to 512 "
    "(paged: dynamic), scale 1/sqrt(dh), the device's grid",
    3, 4, false, false, op_params_of(SdpaDecodeParams{}), check_decode<false>, nullptr, run_decode_op<false>};

extern const TtOpDesc kOpFlashMlaDecode = {
    "flash-mla-decode", "Q K",
    "ttnn.transformer.flash_multi_latent_attention_decode (and paged_..., with --page-table): multi-head latent "
    "attention's decode, Q [1, b, nh, dh] against the latent cache K [b, 1 or nkv, S, dh], V = K's first head_dim_v "
    "columns read from K; sdpa-decode's device operation and kernel with use_mla; out [1, b, nh, head_dim_v]",
    "as sdpa-decode: HiFi2, approx on, fp32 Dst off, exp_approx_mode on, k_chunk_size = largest power of 2 dividing "
    "S up to 512 (paged: dynamic), scale 1/sqrt(dh), the device's grid",
    2, 2, false, false, op_params_of(FlashMlaDecodeParams{}), check_decode<true>, nullptr, run_decode_op<true>};

}  // namespace mha::ttsim
