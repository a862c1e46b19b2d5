#pragma once
// tt-sim's multi-head latent attention (AttentionSpec::mla, DeepSeek-V3 and
// Kimi K2): prefill in the absorbed form through
// ttnn.transformer.flash_mla_prefill, as TT-NN's DeepSeek-V3 attention runs
// it (docs/TTSIM.md "Flash MLA"). Per user b, with H heads, dn / dr / dv the
// nope / rope / value widths and kl the kv_lora_rank:
//
//   x [1, 1, Lp, E]
//   q  = linear(x, wq_a) (+ b); rms_norm(q_a_layernorm); linear(., wq_b)
//        (or linear(x, wq))                       -> [1, 1, Lp, H (dn + dr)]
//   heads, sliced: q_nope [1, H, Lp, dn], q_pe [1, H, Lp, dr]
//   rotary_embedding_llama(q_pe)                  (DeepSeek's interleaved pairs)
//   matmul(q_nope, W_kb [1, H, dn, kl])           -> [1, H, Lp, kl]
//   concat with q_pe                              -> q [1, H, Lp, kl + dr]
//   kv = linear(x, wkv_a) (+ b)                   -> [1, 1, Lp, kl + dr]
//   rms_norm(kv[:kl], kv_a_layernorm); rotary(kv[kl:]); concat -> kvpe
//   typecast q, kvpe; flash_mla_prefill(q, kvpe, head_dim_v = kl, scale)
//                                                 -> [1, H, Lp, kl]
//   matmul(., W_vb [1, H, kl, dv])                -> [1, H, Lp, dv]
//   nlp_concat_heads; linear(., wo) (+ bo)        -> [1, 1, Lp, E_out]
//
// Formats and compute configs are the SDPA path's recipe (SdpaRecipe).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/ttsim/ttsim_sdpa.h"
#include "model/rope.h"

namespace mha::ttsim {

// The weights as the model holds them: linears transposed to [in, out],
// kv_b_proj split per head into W_kb [1, H, dn, kl] (k_nope rows) and W_vb
// [1, H, kl, dv] (v rows, transposed), the norms' weights in bfloat16.
struct MlaWeights {
  TileTensor wq, wq_b, wkv, w_kb, w_vb, wo;
  bool has_q_b = false, has_out = false;
  std::optional<TileTensor> bq, bkv, bo;
  std::vector<float> q_norm, kv_norm;
  std::vector<const TileTensor*> all() const;
};
MlaWeights convert_mla_weights(const AttentionSpec& spec, const SdpaRecipe& r);

// Why tt-sim cannot run this MLA spec (one line), or nullopt.
std::optional<std::string> mla_unsupported(const AttentionSpec& spec, const AttentionInputs* in);

// One forward pass (prefill of every user); stages context [B, L, H dv]
// and output when asked.
AttentionResult run_mla_prefill(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                                const AttentionInputs& in, const RunOptions& opt);

// The KV-cache session (backends/decode.h): a latent cache [B, 1, S, kl +
// dr] on the device in the recipe's cache dtype; the first append prefills
// every user (fill_cache of the latent rows), each later token runs
// flash_multi_latent_attention_decode over the cache at cur_pos = length
// (ttsim_mla_decode.cpp lists the ops).
std::unique_ptr<DecodeSession> make_mla_decode(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w,
                                               const AttentionSpec& spec, const DecodeOptions& opt);

// The steps prefill and decode share (ttsim_mla_pipeline.cpp), on rows that
// are tokens (prefill) or users (decode):
// linear(q_a) (+ b), rms_norm, linear(q_b) (or linear(q_proj)): x [1, 1,
// rows, E] -> [1, 1, rows, H (dn + dr)].
TileTensor mla_query_rows(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                          const TileTensor& x);
// linear(kv_a) (+ b): x [1, 1, rows, E] -> [1, 1, rows, kl + dr].
TileTensor mla_latent_rows(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& x);
// rms_norm(kv_a_layernorm) over c's last dim (kl).
TileTensor mla_norm_latent(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                           const TileTensor& c);
// matmul(q_nope [1, H, rows, dn], W_kb) -> [1, H, rows, kl].
TileTensor mla_absorb(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& q_nope);
// matmul(latent [1, H, rows, kl], W_vb) -> [1, H, rows, dv].
TileTensor mla_expand(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& latent);
// Columns [c0, c0 + n) of every head of x: x [1, 1, s, H * stride] gives
// [1, H, s, n] (head h's columns start at h * stride), x [1, H, s, w]
// (stride 0) gives its own columns. Exact data movement (reshape, permute,
// slice: the values move unchanged), registered as op `op`.
TileTensor mla_head_columns(TtDevice& dev, const char* op, const TileTensor& x, int64_t H, int64_t stride,
                            int64_t c0, int64_t n);
// ttnn.concat(a, b, dim=-1) of two tensors of one format and leading shape.
TileTensor mla_concat_last(TtDevice& dev, const TileTensor& a, const TileTensor& b);

// One user's prefill, x [1, 1, Lp, E] (the op list above); with a cache,
// the latent rows are written to user b's rows 0 .. Lp - 1 (fill_cache).
struct MlaUserOut {
  TileTensor out, ctx;
};
MlaUserOut mla_prefill_user(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                            const TileTensor& x, const RopeTable& rope, int64_t b, TileTensor* cache);

}  // namespace mha::ttsim
