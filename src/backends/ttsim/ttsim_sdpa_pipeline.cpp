#include <algorithm>
#include <cmath>

#include "backends/ttsim/ttsim_sdpa.h"
#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "backends/ttsim/ops/kv_cache/kv_cache.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"
#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ttsim_sdpa_steps.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"

namespace mha::ttsim {

// tt_transformers' get_padded_prefill_len: 128 up to 128 tokens, then the
// smaller of the next power of two and the next multiple of 2048. Padding
// rows come after every real row, so the causal mask keeps them out of the
// real rows' results; only the chunk size (by padded length) depends on it.
int64_t padded_prefill_len(int64_t L) {
  if (L <= 128) return 128;
  int64_t p = 1;
  while (p < L) p *= 2;
  return std::min(p, (L + 2047) / 2048 * 2048);
}

// Rows [0, L) of user b of x [B, L, E] as the device tensor [1, 1, Lp, E].
TileTensor user_rows(const Tensor& x, int64_t b, int64_t Lp, DataFormat f) {
  const int64_t L = x.dim(1), E = x.dim(2);
  std::vector<float> v(static_cast<size_t>(Lp * E), 0.0f);
  std::copy_n(x.data<float>() + b * L * E, L * E, v.data());
  return to_tile_layout(v.data(), {1, 1, Lp, E}, f);
}

// Rows [0, rows) of every matrix of t, row-major [batch, rows, cols].
std::vector<float> first_rows(const TileTensor& t, int64_t rows) {
  std::vector<float> v(static_cast<size_t>(t.batch * rows * t.cols));
  for (int64_t m = 0; m < t.batch; ++m)
    for (int64_t r = 0; r < rows; ++r) std::copy_n(t.matrix(m) + r * t.pcols, t.cols, &v[(m * rows + r) * t.cols]);
  return v;
}

namespace {

// A stage tensor [B, ...] filled one user's block at a time.
struct StageBuf {
  Tensor t;
  void put(int64_t b, const std::vector<float>& v) {
    std::copy(v.begin(), v.end(), t.data<float>() + b * static_cast<int64_t>(v.size()));
  }
};

}  // namespace

PrefillOut sdpa_prefill_user(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                             const TileTensor& x, const RopeTable* rope, int64_t b, TileTensor* cache_k,
                             TileTensor* cache_v) {
  const SdpaDims d = sdpa_dims(spec);
  const int64_t Lp = x.rows;
  QkvHeads h = create_qkv_heads(dev, d, sdpa_qkv_linear(dev, r, w, x, true));
  qk_norm_heads(dev, r, w, spec, h);
  if (rope) {
    const RotaryTables t = rotary_prefill_tables(*rope, b, Lp);
    const TileTensor trans = rotary_llama_trans_mat(DataFormat::Bfloat16);
    RotaryAttributes ra;
    ra.compute = r.rotary;
    h.q = run_rotary_llama(dev, h.q, t.cos, t.sin, trans, ra);
    h.k = run_rotary_llama(dev, h.k, t.cos, t.sin, trans, ra);
  }
  PrefillOut o;
  o.k = run_typecast(dev, h.k, r.cache);
  o.v = run_typecast(dev, h.v, r.cache);
  if (cache_k) run_fill_cache(dev, *cache_k, o.k, b, 0);
  if (cache_v) run_fill_cache(dev, *cache_v, o.v, b, 0);
  const TileTensor q8 = run_typecast(dev, h.q, r.q_sdpa);
  // SDPA_PROGCFG: q_chunk_size = k_chunk_size; causal. mha's window (key j
  // visible to query i iff i - window < j <= i, model/mask.h) is TT-NN's
  // causal sliding_window_size ([q - W + 1, q]).
  SdpaConfig c;
  c.q_chunk_size = c.k_chunk_size = std::min(SdpaRecipe::chunk(Lp), q8.prows);
  c.exp_approx_mode = r.exp_approx_prefill;
  c.is_causal = true;
  c.sliding_window_size = spec.window;
  c.attention_sink = w.sinks;
  c.scale = static_cast<float>(spec.scale);
  c.compute = r.sdpa_prefill;
  c.compute.output = r.q_sdpa;
  const TileTensor attn =
      run_sdpa(dev, "ttnn.transformer.scaled_dot_product_attention", q8, o.k, o.v, nullptr, c);
  o.ctx = concat_heads(dev, attn);
  o.out = spec.out ? sdpa_out_linear(dev, r, w, o.ctx, true) : o.ctx;
  o.q = std::move(h.q);
  return o;
}

AttentionResult run_sdpa_prefill(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                                 const AttentionInputs& in, const RunOptions& opt) {
  const SdpaDims d = sdpa_dims(spec);
  const int64_t B = in.query.dim(0), L = in.query.dim(1), Lp = padded_prefill_len(L);
  dev.set_memory(MemoryKind::DRAM);  // the model's prefill tensors live in DRAM
  dev.set_resident(w.all());
  std::optional<RopeTable> rope;
  if (spec.rope) rope = rope_table(spec, in);
  AttentionResult res;
  res.output = Tensor(DType::F32, {B, L, d.E_out});
  StageBuf q{Tensor(DType::F32, {B, d.H, L, d.dh})}, k{Tensor(DType::F32, {B, d.Hkv, L, d.dh})},
      v{Tensor(DType::F32, {B, d.Hkv, L, d.dh})}, ctx{Tensor(DType::F32, {B, L, d.H * d.dh})};
  for (int64_t b = 0; b < B; ++b) {
    const PrefillOut o =
        sdpa_prefill_user(dev, r, w, spec, user_rows(in.query, b, Lp, r.act), rope ? &*rope : nullptr, b, nullptr,
                          nullptr);
    const std::vector<float> y = first_rows(o.out, L);
    std::copy(y.begin(), y.end(), res.output.data<float>() + b * L * d.E_out);
    if (!opt.collect_stages) continue;
    std::vector<float> qs = first_rows(o.q, L), ks = first_rows(o.k, L);
    if (spec.rope) meta_to_hf(qs, d.dh), meta_to_hf(ks, d.dh);
    q.put(b, qs);
    k.put(b, ks);
    v.put(b, first_rows(o.v, L));
    ctx.put(b, first_rows(o.ctx, L));
  }
  if (opt.collect_stages)
    res.stages = {{"q", q.t}, {"k", k.t}, {"v", v.t}, {"context", ctx.t}, {"output", res.output}};
  return res;
}

Tensor sdpa_project_output(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                           const Tensor& context) {
  const int64_t B = context.dim(0), L = context.dim(1), Lp = padded_prefill_len(L), E = spec.out_dim();
  dev.set_memory(MemoryKind::DRAM);
  dev.set_resident(w.all());
  Tensor out(DType::F32, {B, L, E});
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> y = first_rows(sdpa_out_linear(dev, r, w, user_rows(context, b, Lp, r.q_sdpa), true), L);
    std::copy(y.begin(), y.end(), out.data<float>() + b * L * E);
  }
  return out;
}

}  // namespace mha::ttsim
