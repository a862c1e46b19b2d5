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
#include <optional>
#include <string>
#include <vector>

#include "backends/ttsim/ttsim_sdpa.h"

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

}  // namespace mha::ttsim
