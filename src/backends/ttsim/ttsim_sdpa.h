#pragma once
// tt-sim's SDPA attention path: a spec run as tt_transformers' Llama
// attention runs a layer (models/tt_transformers/tt/attention.py; the
// revision and the op list with formats are in docs/TTSIM.md, "SDPA
// attention"). Per user b (TT-NN's prefill runs one user per call):
//
//   prefill  x [1, 1, L, E]
//     ttnn.linear(x, wqkv)                 -> xqkv [1, 1, L, (H + 2 Hkv) dh]
//     (+ bqkv: a separate ttnn.add, as the model adds its bias)
//     nlp_create_qkv_heads                 -> q [1, H, L, dh], k, v [1, Hkv, L, dh]
//     rotary_embedding_llama(q), (k)       (specs with a rotary embedding)
//     typecast k, v to the cache dtype; fill_cache(cache_k / cache_v, ., b)
//     typecast q to bfloat8_b; scaled_dot_product_attention(q, k, v, causal)
//                                          -> [1, H, L, dh]
//     nlp_concat_heads                     -> [1, 1, L, H dh]
//     ttnn.linear(., wo) (+ bo)            -> [1, 1, L, E_out]
//   decode   x [1, 1, B, E] (one token per user)
//     ttnn.linear(x, wqkv) (+ bqkv)        -> [1, 1, B, (H + 2 Hkv) dh]
//     nlp_create_qkv_heads_decode          -> q [1, B, H, dh], k, v [1, B, Hkv, dh]
//     rotary_embedding_llama (decode mode)
//     paged_update_cache(cache_k / cache_v, ., cur_pos)
//     scaled_dot_product_attention_decode(q, cache_k, cache_v, cur_pos)
//                                          -> [1, B, H, dh]
//     nlp_concat_heads_decode; ttnn.linear(., wo) (+ bo) -> [1, 1, B, E_out]
//
// A rotary spec's q and k weight rows are permuted per head into Meta's
// interleaved order (tt_transformers' convert_hf_to_meta), which the
// transformation-matrix rotary rotates; scores do not change (q and k share
// the permutation) and the q / k stages are permuted back.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/decode.h"
#include "backends/ttsim/ops/device_op.h"
#include "model/attention.h"

namespace mha::ttsim {

// Formats and compute configs per op: tt_transformers' ModelOptimizations
// for Llama-3 ("performance", which for attention equals "accuracy" there):
// WQKV, WO and KV cache bfloat8_b; activations bfloat16; LI_QKV / LI_O /
// SDPA_DECODE at HIFI2 (HiFi2, approx, fp32 Dst, packer L1 acc), SDPA_PREFILL
// at HIFI4 (HiFi4, no approx, fp32 Dst). Options override: dtype (the
// weights), kv_cache_dtype, math_fidelity and fp32_dest_acc_en (every op).
struct SdpaRecipe {
  DataFormat act = DataFormat::Bfloat16;    // x, QKV linear output, heads, rotary
  DataFormat weights = DataFormat::Bfp8_b;  // wqkv, wo (and their biases)
  DataFormat cache = DataFormat::Bfp8_b;    // KV cache and SDPA's K, V
  DataFormat q_sdpa = DataFormat::Bfp8_b;   // typecast(q, activation_dtype or bfloat8_b)
  DataFormat out_prefill = DataFormat::Bfp8_b;  // WO prefill: dtype=activation_dtype or bfloat8_b
  DataFormat out_decode = DataFormat::Bfloat16;  // WO decode: the input's dtype
  ComputeConfig qkv, wo, sdpa_prefill, sdpa_decode, rotary;
  // QK-norm (Qwen3): tt_transformers' RMSNorm module's
  // compute_kernel_config_hifi2 (HiFi2, no approx, fp32 Dst), output bfloat16.
  ComputeConfig qk_norm;
  bool exp_approx_prefill = false;  // SDPA_PROGCFG exp_approx_mode
  Grid grid;                        // compute_with_storage_grid_size (8, 8)
  // SDPA_PROGCFG's q_chunk_size = k_chunk_size: 256 from 2048 tokens, else 64.
  static int64_t chunk(int64_t seq_len) { return seq_len >= 2048 ? 256 : 64; }
};
SdpaRecipe make_sdpa_recipe(const TtOptions& o);
nlohmann::json sdpa_recipe_json(const SdpaRecipe& r);

// Weights as the model holds them: wqkv [E, (H + 2 Hkv) dh] (wq | wk | wv
// transposed and concatenated; q and k rows in Meta order for a rotary
// spec), wo [H dv, E_out], biases as rows.
struct SdpaWeights {
  TileTensor wqkv, wo;
  std::optional<TileTensor> bqkv, bo;
  // QK-norm weights as the RMSNorm module holds them (bfloat16 ROW_MAJOR,
  // (1 + w) folded in at load for Gemma's form, Meta order for a rotary
  // spec as convert_hf_to_meta's reverse_permute_1d orders them); empty
  // without qk_norm.
  std::vector<float> q_norm, k_norm;
  // attention_sink as TT-NN's gpt-oss attention passes it to prefill and
  // decode: the sinks divided by the softmax scale, bfloat16; empty without
  // sinks.
  std::vector<float> sinks;
  std::vector<const TileTensor*> all() const;
};
SdpaWeights convert_sdpa_weights(const AttentionSpec& spec, const SdpaRecipe& r);

// Why the spec cannot run as SDPA (one line), or nullopt; `in` is absent for
// a decode session (its inputs are checked per append).
std::optional<std::string> sdpa_unsupported(const AttentionSpec& spec, const AttentionInputs* in);

// One forward pass (prefill of every user), stages q, k, v (after rotary,
// [B, H or Hkv, L, dh]), context [B, L, H dv] and output when asked.
AttentionResult run_sdpa_prefill(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                                 const AttentionInputs& in, const RunOptions& opt);

// The output projection of every user's context [B, L, H dv], as
// run_sdpa_prefill applies it to nlp_concat_heads' result: rows in the SDPA
// output's format (q_sdpa) padded to the prefill length, ttnn.linear(., wo)
// (+ bo) per user -> [B, L, E_out]. Head-parallel (src/parallel/) gathers the
// ranks' contexts (run_sdpa_prefill of their heads' share, without `out`)
// and projects them here: the bits of one process's run, since every step
// before the projection computes a head's bits whatever heads surround it
// (the QKV linear's K blocking is the explicit program config's, and a head
// is whole tiles), and the projection's row r reads context row r only.
Tensor sdpa_project_output(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                           const Tensor& context);

// The KV-cache session (backends/decode.h) on the device: the first append
// is a prefill of every user into the caches (fill_cache), each later append
// of one token runs the decode ops above. The device, recipe and weights
// must outlive the session.
std::unique_ptr<DecodeSession> make_sdpa_decode(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w,
                                                const AttentionSpec& spec, const DecodeOptions& opt);

}  // namespace mha::ttsim
