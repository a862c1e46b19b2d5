#pragma once
// The steps of the SDPA pipeline (ttsim_sdpa.h) that prefill and decode
// share: the model's ops on one call's tensors, plus the host-side tables
// (rotary cos / sin, the transformation matrix) the model uploads.
#include <cstdint>
#include <vector>

#include "backends/ttsim/ttsim_sdpa.h"
#include "model/rope.h"

namespace mha::ttsim {

struct SdpaDims {
  int64_t H, Hkv, dh, E, E_out;
};
SdpaDims sdpa_dims(const AttentionSpec& spec);

// ttnn.linear (op `op`) with the recipe's grid, then with a bias the model's
// separate ttnn.add (broadcast over rows). in0_block_w 1: an explicit
// MatmulMultiCoreReuseMultiCastProgramConfig with in0_block_w = 1 (K
// passes Dst one tile at a time, XQKV_PREFILL_PROGCFG); 0: TT-NN's own
// program selection.
TileTensor linear_bias(TtDevice& dev, const char* op, const TileTensor& x, const TileTensor& w,
                       const std::optional<TileTensor>& b, const ComputeConfig& c, Grid grid, int64_t in0_block_w);

// ttnn.linear(x, wqkv) then, with a bias, ttnn.add (the model adds it
// separately): x [.., rows, E] -> [.., rows, (H + 2 Hkv) dh] in r.act.
// Prefill runs XQKV_PREFILL_PROGCFG's K blocking (in0_block_w = 1).
TileTensor sdpa_qkv_linear(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const TileTensor& x,
                           bool prefill);
// ttnn.linear(ctx, wo) (+ bo): [.., rows, H dh] -> [.., rows, E_out] in
// out_prefill / out_decode.
TileTensor sdpa_out_linear(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const TileTensor& ctx,
                           bool prefill);

struct QkvHeads {
  TileTensor q, k, v;
};
// nlp_create_qkv_heads: xqkv [1, 1, s, W] -> q [1, H, s, dh], k / v [1, Hkv, s, dh].
QkvHeads create_qkv_heads(TtDevice& dev, const SdpaDims& d, const TileTensor& xqkv);
// nlp_create_qkv_heads_decode: xqkv [1, 1, b, W] -> q [1, b, H, dh], k / v [1, b, Hkv, dh].
QkvHeads create_qkv_heads_decode(TtDevice& dev, const SdpaDims& d, const TileTensor& xqkv);
// The model's q_norm / k_norm (tt_transformers' RMSNorm, ttnn.rms_norm over
// dh) on the heads, before rotary; nothing without spec.qk_norm.
void qk_norm_heads(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec, QkvHeads& h);
// nlp_concat_heads: [1, H, s, dh] -> [1, 1, s, H dh].
TileTensor concat_heads(TtDevice& dev, const TileTensor& ctx);
// nlp_concat_heads_decode: [1, b, H, dh] -> [1, 1, b, H dh].
TileTensor concat_heads_decode(TtDevice& dev, const TileTensor& ctx);

// cos / sin in Meta's interleaved order (both columns of a pair share one
// angle), bfloat16 as from_torch converts them.
struct RotaryTables {
  TileTensor cos, sin;
};
// Prefill: [1, 1, rows, dh], the first t.L rows from table row b of `t`
// (positions past the table, the padding, get angle 0).
RotaryTables rotary_prefill_tables(const RopeTable& t, int64_t b, int64_t rows);
// Decode: [1, users, 1, dh], user u's single-row table `per_user[u]` (the
// kernel broadcasts it over the user's head rows).
RotaryTables rotary_decode_tables(const std::vector<RopeTable>& per_user);

// tt_transformers' get_padded_prefill_len: the token count a prefill runs at.
int64_t padded_prefill_len(int64_t L);
// Rows [0, L) of user b of x [B, L, E] as the device tensor [1, 1, Lp, E].
TileTensor user_rows(const Tensor& x, int64_t b, int64_t Lp, DataFormat f);
// Rows [0, rows) of every matrix of t, row-major [batch, rows, cols].
std::vector<float> first_rows(const TileTensor& t, int64_t rows);

// One user's prefill: x [1, 1, Lp, E] -> out [1, 1, Lp, E_out]; q (after
// rotary, bfloat16), k and v (as SDPA and the cache see them) and ctx are
// kept for stages. `rope`: the spec's table (row b is this user's), or
// null; with caches, k and v are written to user b's rows 0 .. Lp - 1.
struct PrefillOut {
  TileTensor out, q, k, v, ctx;
};
PrefillOut sdpa_prefill_user(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                             const TileTensor& x, const RopeTable* rope, int64_t b, TileTensor* cache_k,
                             TileTensor* cache_v);

// Meta-ordered head columns back to Hugging Face's rotate_half order, in
// place on a row-major [.., dh] array.
void meta_to_hf(std::vector<float>& v, int64_t dh);

}  // namespace mha::ttsim
