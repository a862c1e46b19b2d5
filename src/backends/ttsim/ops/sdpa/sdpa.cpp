// ttnn.transformer.scaled_dot_product_attention (prefill): Q K V [MASK] in
// TT-NN's layouts, the program config and causal flag as --option keys; and
// chunked_scaled_dot_product_attention, the same device operation with a
// page table and a chunk start (--page-table, --chunk-start-idx).
#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

constexpr const char* kHeadDimVHelp =
    "V's head dim, required (no default): V is K's first head_dim_v columns, a multiple of 32";

// The op's own keys (SDPAProgramConfig, is_causal, scale, sliding window,
// attention sink: SdpaConfig's fields) over TT-NN's defaults; the sink
// held as bf16 as from_torch converts it.
SdpaConfig sdpa_params(const nlohmann::ordered_json& p) {
  SdpaConfig c;
  fields::parse_into(c, p, "op options", "sdpa option");
  for (float& s : c.attention_sink) s = host_round_bf16(s);
  return c;
}

// TT-NN's SDPA compute kernel config defaults (both ops: HiFi2, approx on,
// 16-bit Dst) under the backend options, and the output's format.
void sdpa_compute(const OpCall& c, SdpaConfig& cfg) {
  cfg.compute.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi2);
  cfg.compute.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.compute.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  apply_device(cfg.compute, c.opt);
  cfg.compute.output = c.out_format;
  cfg.compute.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
}

// What --json reports of both ops' configs.
void sdpa_report(OpCall& c, const SdpaConfig& cfg) {
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.compute.math_fidelity)},
                                     {"math_approx_mode", cfg.compute.math_approx_mode},
                                     {"fp32_dest_acc_en", cfg.compute.fp32_dest_acc_en},
                                     {"packer_l1_acc", c.opt.packer_l1_acc.value_or(false)}};
  c.info["program_config"] = {{"q_chunk_size", cfg.q_chunk_size},
                              {"k_chunk_size", cfg.k_chunk_size},
                              {"exp_approx_mode", cfg.exp_approx_mode}};
  c.info["attributes"] = fields::json_of(cfg);
  c.info["is_causal"] = cfg.is_causal;
  c.info["scale_bf16"] = sdpa_scale_bf16(cfg, c.in[0].cols);
}

// The shape rules every profile shares (the latest programs' padded ones);
// run_sdpa's validate adds the profile's own (2024: whole chunks).
void check_sdpa(const OpCheck& c) {
  const SdpaConfig cfg = sdpa_params(c.params);
  const Shape* mask = c.inputs.size() == 4 ? &c.inputs[3].shape() : nullptr;
  const std::string p = sdpa_padded_problem(c.inputs[0].shape(), c.inputs[1].shape(), c.inputs[2].shape(), mask, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
}

TileTensor run_sdpa_op(OpCall& c) {
  SdpaConfig cfg = sdpa_params(c.params);
  sdpa_compute(c, cfg);
  const TileTensor* mask = c.in.size() == 4 ? &c.in[3] : nullptr;
  TileTensor out = run_sdpa(c.dev, c.program, c.in[0], c.in[1], c.in[2], mask, cfg);
  sdpa_report(c, cfg);
  c.info["sliding_window_size"] = cfg.sliding_window_size;
  if (!cfg.attention_sink.empty()) c.info["attention_sink_bf16"] = cfg.attention_sink;
  return out;
}

// chunked-sdpa's params: the two runtime arguments, then the keys it
// shares with sdpa (program config, scale) and the compute config;
// chunked-flash-mla-prefill's (Mla = true) TT-NN's head_dim_v too.
template <bool Mla>
struct ChunkedParams {
  int64_t chunk_start_idx = 0;
  PageTable page_table;
  SdpaConfig cfg;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("chunk_start_idx", chunk_start_idx,
      "the chunk's first position in the sequence (--chunk-start-idx N), a multiple of q_chunk_size and "
      "k_chunk_size; required", flag);
    v("page_table", page_table, "[b][blocks] block ids of each user's paged cache (--page-table FILE)", flag);
    if (Mla) v("head_dim_v", cfg.head_dim_v, kHeadDimVHelp);
    cfg.shared_fields(v);
    cfg.compute.fields(v, fields::kDerived);
  }
};

template <bool Mla>
ChunkedParams<Mla> chunked_params(const nlohmann::ordered_json& p) {
  const std::string op = Mla ? "chunked-flash-mla-prefill" : "chunked-sdpa";
  for (const char* key : {"chunk_start_idx", "page_table"})
    if (!p.contains(key)) throw InputError(op + ": " + op_flag_name(key) + " (the " + key + " param) is required");
  if (Mla && !p.contains("head_dim_v"))
    throw InputError(op + ": --option head_dim_v=N (V's head dim, K's first N columns) is required");
  ChunkedParams<Mla> d;
  fields::parse_into(d, p, "op options", Mla ? "chunked-flash-mla-prefill option" : "chunked-sdpa option");
  check_page_table(d.page_table);
  return d;
}

template <bool Mla>
void check_chunked(const OpCheck& c) {
  require_4d(c, Mla ? "chunked-flash-mla-prefill" : "chunked-sdpa");
  chunked_params<Mla>(c.params);
}

// Both chunked ops: chunked-sdpa's Q K V, chunked-flash-mla-prefill's Q K.
template <bool Mla>
TileTensor run_chunked_op(OpCall& c) {
  ChunkedParams<Mla> d = chunked_params<Mla>(c.params);
  sdpa_compute(c, d.cfg);
  TileTensor out =
      Mla ? run_chunked_flash_mla_prefill(c.dev, c.program, c.in[0], c.in[1], d.page_table, d.chunk_start_idx, d.cfg)
          : run_chunked_sdpa(c.dev, c.program, c.in[0], c.in[1], c.in[2], d.page_table, d.chunk_start_idx, d.cfg);
  sdpa_report(c, d.cfg);
  c.info["chunk_start_idx"] = d.chunk_start_idx;
  if (Mla) c.info["head_dim_v"] = d.cfg.head_dim_v;
  return out;
}

// flash-mla-prefill's params: TT-NN's head_dim_v (required), then what
// flash_mla_prefill takes of sdpa's (program config, scale, is_causal; no
// window or sink) and the compute config.
struct FlashMlaParams {
  SdpaConfig cfg;
  template <class V>
  void fields(V& v) {
    v("head_dim_v", cfg.head_dim_v, kHeadDimVHelp);
    cfg.shared_fields(v);
    v("is_causal", cfg.is_causal, "true/false (default true; a MASK needs false)");
    cfg.compute.fields(v, fields::kDerived);
  }
};

FlashMlaParams flash_mla_params(const nlohmann::ordered_json& p) {
  if (!p.contains("head_dim_v"))
    throw InputError("flash-mla-prefill: --option head_dim_v=N (V's head dim, K's first N columns) is required");
  FlashMlaParams d;
  fields::parse_into(d, p, "op options", "flash-mla-prefill option");
  return d;
}

void check_flash_mla_prefill(const OpCheck& c) {
  require_4d(c, "flash-mla-prefill");
  flash_mla_params(c.params);
}

TileTensor run_flash_mla_prefill_op(OpCall& c) {
  FlashMlaParams d = flash_mla_params(c.params);
  sdpa_compute(c, d.cfg);
  const TileTensor* mask = c.in.size() == 3 ? &c.in[2] : nullptr;
  TileTensor out = run_flash_mla_prefill(c.dev, c.program, c.in[0], c.in[1], mask, d.cfg);
  sdpa_report(c, d.cfg);
  c.info["attributes"] = fields::json_of(d);
  c.info["head_dim_v"] = d.cfg.head_dim_v;
  return out;
}

}  // namespace

extern const TtOpDesc kOpSdpa = {
    "sdpa", "Q K V [MASK]",
    "ttnn.transformer.scaled_dot_product_attention: Q (b, nqh, s, dh), K and V (b, nkv, s, dh), MASK (b, 1, s, s) "
    "with is_causal=false; FlashAttention-2 over q and k chunks as tt-metal's kernel computes it",
    "HiFi2, math_approx_mode on, fp32 Dst off, packer_l1_acc off; chunks of 32; causal; scale 1/sqrt(dh)", 3, 4,
    false, false,
    op_params_of(SdpaConfig{}),
    check_sdpa, nullptr, run_sdpa_op};

extern const TtOpDesc kOpChunkedSdpa = {
    "chunked-sdpa", "Q K V",
    "ttnn.transformer.chunked_scaled_dot_product_attention: Q (b, nqh, s, dh), the positions chunk_start_idx.. of "
    "each user, over the paged K/V cache (blocks, nkv, block_size, dh) through --page-table (required); causal; "
    "sdpa's kernel",
    "as sdpa: HiFi2, math_approx_mode on, fp32 Dst off; chunks of 32; scale 1/sqrt(dh)", 3, 3, false, false,
    op_params_of(ChunkedParams<false>{}), check_chunked<false>, nullptr, run_chunked_op<false>};

extern const TtOpDesc kOpFlashMlaPrefill = {
    "flash-mla-prefill", "Q K [MASK]",
    "ttnn.transformer.flash_mla_prefill: multi-head latent attention, Q (b, nqh, s, dh) against the latent rows K "
    "(b, nkv, s, dh), V = K's first head_dim_v columns (read from K's tiles); sdpa's device operation and kernel "
    "with use_mla; out (b, nqh, s, head_dim_v)",
    "as sdpa: HiFi2, math_approx_mode on, fp32 Dst off; chunks of 32; causal; scale 1/sqrt(dh)", 2, 3, false, false,
    op_params_of(FlashMlaParams{}), check_flash_mla_prefill, nullptr, run_flash_mla_prefill_op};

extern const TtOpDesc kOpChunkedFlashMlaPrefill = {
    "chunked-flash-mla-prefill", "Q K",
    "ttnn.transformer.chunked_flash_mla_prefill: Q (b, nqh, s, dh), the positions chunk_start_idx.. of each user, "
    "over the paged latent cache K (blocks, nkv, block_size, dh) through --page-table (required), V = K's first "
    "head_dim_v columns; causal; chunked-sdpa's operation with use_mla; out (b, nqh, s, head_dim_v)",
    "as sdpa: HiFi2, math_approx_mode on, fp32 Dst off; chunks of 32; scale 1/sqrt(dh)", 2, 2, false, false,
    op_params_of(ChunkedParams<true>{}), check_chunked<true>, nullptr, run_chunked_op<true>};

}  // namespace mha::ttsim
