// Multi-head latent attention on tt-sim (ttsim_mla.h): the weights as the
// model holds them, the refusals, and the prefill of every user.
#include <algorithm>
#include <cstring>

#include "backends/ttsim/ttsim_mla.h"
#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "backends/ttsim/ops/kv_cache/kv_cache.h"
#include "backends/ttsim/ops/matmul/matmul.h"
#include "backends/ttsim/ops/rms_norm/rms_norm.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"
#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ttsim_sdpa_steps.h"

namespace mha::ttsim {

namespace {

// A (out, in) weight as [in, out] in `f`.
TileTensor transposed(const Tensor& w, DataFormat f) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const std::vector<float> v = w.to_f32();
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) t[c * out + r] = v[r * in + c];
  return to_tile_layout(t.data(), {in, out}, f);
}

std::optional<TileTensor> bias_row(const std::optional<Tensor>& b, DataFormat f) {
  if (!b) return std::nullopt;
  const std::vector<float> v = b->to_f32();
  return to_tile_layout(v.data(), {1, static_cast<int64_t>(v.size())}, f);
}

std::vector<float> norm_weight(const Tensor& w) {
  const std::vector<float> v = w.to_f32();
  return rms_norm_weight_bf16(v.data(), static_cast<int64_t>(v.size()), false);
}

// kv_b_proj [H (dn + dv), kl] per head: W_kb [1, H, dn, kl] (the k_nope
// rows as they are: q_nope @ W_kb) and W_vb [1, H, kl, dv] (the v rows
// transposed: latent @ W_vb).
void split_kv_b(const AttentionSpec& spec, DataFormat f, MlaWeights& w) {
  const Mla& m = *spec.mla;
  const int64_t H = spec.num_heads, dn = m.nope_dim, dv = spec.head_dim_v, kl = m.kv_lora_rank;
  const std::vector<float> kvb = m.kv_b.weight.to_f32();
  std::vector<float> kb(static_cast<size_t>(H * dn * kl)), vb(static_cast<size_t>(H * kl * dv));
  for (int64_t h = 0; h < H; ++h) {
    const float* rows = kvb.data() + h * (dn + dv) * kl;
    std::copy_n(rows, dn * kl, &kb[h * dn * kl]);
    for (int64_t d = 0; d < dv; ++d)
      for (int64_t c = 0; c < kl; ++c) vb[(h * kl + c) * dv + d] = rows[(dn + d) * kl + c];
  }
  w.w_kb = to_tile_layout(kb.data(), {1, H, dn, kl}, f);
  w.w_vb = to_tile_layout(vb.data(), {1, H, kl, dv}, f);
}

}  // namespace

TileTensor mla_head_columns(TtDevice& dev, const char* op, const TileTensor& x, int64_t H, int64_t stride, int64_t c0,
                        int64_t n) {
  TileTensor out = make_tile_tensor({1, H, x.rows, n}, x.format);
  for (int64_t h = 0; h < H; ++h) {
    const float* src = stride > 0 ? x.matrix(0) + h * stride + c0 : x.matrix(h) + c0;
    for (int64_t r = 0; r < x.prows; ++r) std::copy_n(src + r * x.pcols, n, out.matrix(h) + r * out.pcols);
  }
  return run_head_movement(dev, op, "c0=" + std::to_string(c0) + ",n=" + std::to_string(n), x, std::move(out));
}

TileTensor mla_concat_last(TtDevice& dev, const TileTensor& a, const TileTensor& b) {
  TileTensor out = make_tile_tensor({a.shape[0], a.shape[1], a.rows, a.cols + b.cols}, a.format);
  for (int64_t m = 0; m < a.batch; ++m)
    for (int64_t r = 0; r < a.prows; ++r) {
      std::copy_n(a.matrix(m) + r * a.pcols, a.cols, out.matrix(m) + r * out.pcols);
      std::copy_n(b.matrix(m) + r * b.pcols, b.cols, out.matrix(m) + r * out.pcols + a.cols);
    }
  return run_head_movement(dev, "ttnn.concat", "", a, std::move(out));
}

std::vector<const TileTensor*> MlaWeights::all() const {
  std::vector<const TileTensor*> v{&wq, &wkv, &w_kb, &w_vb};
  if (has_q_b) v.push_back(&wq_b);
  if (has_out) v.push_back(&wo);
  for (const auto* t : {&bq, &bkv, &bo})
    if (*t) v.push_back(&**t);
  return v;
}

MlaWeights convert_mla_weights(const AttentionSpec& spec, const SdpaRecipe& r) {
  const Mla& m = *spec.mla;
  MlaWeights w;
  w.wq = transposed(spec.q.weight, r.weights);
  w.bq = bias_row(spec.q.bias, r.weights);
  if (m.q_b) {
    w.has_q_b = true;
    w.wq_b = transposed(m.q_b->weight, r.weights);
    w.q_norm = norm_weight(*m.q_norm);
  }
  w.wkv = transposed(spec.k.weight, r.weights);
  w.bkv = bias_row(spec.k.bias, r.weights);
  w.kv_norm = norm_weight(m.kv_norm);
  split_kv_b(spec, r.weights, w);
  if (spec.out) {
    w.has_out = true;
    w.wo = transposed(spec.out->weight, r.weights);
    w.bo = bias_row(spec.out->bias, r.weights);
  }
  return w;
}

std::optional<std::string> mla_unsupported(const AttentionSpec& spec, const AttentionInputs* in) {
  const Mla& m = *spec.mla;
  const std::string pre = "multi-head latent attention on tt-sim ";
  auto tiles = [](int64_t n) { return n % 32 == 0; };
  if (!tiles(m.kv_lora_rank) || !tiles(m.rope_dim) || (m.q_lora_rank > 0 && !tiles(m.q_lora_rank)))
    return pre + "needs kv_lora_rank, qk_rope_head_dim and q_lora_rank in whole tiles (multiples of 32: "
                 "flash_mla_prefill's head_dim_v, rotary_embedding_llama's head dim, rms_norm's row), found " +
           std::to_string(m.kv_lora_rank) + ", " + std::to_string(m.rope_dim) + ", " + std::to_string(m.q_lora_rank);
  if (!spec.rope || !spec.rope->interleaved)
    return pre + "rotates interleaved pairs only (rope_interleave, DeepSeek's default), as rotary_embedding_llama does";
  if ((m.q_b && m.q_b->bias) || m.kv_b.bias)
    return pre + "has no bias on q_b_proj or kv_b_proj (DeepSeek-V3's have none)";
  if (!in) return std::nullopt;
  if (in->mask) return pre + "takes no additive mask (flash_mla_prefill runs causal)";
  if (in->training && spec.dropout > 0.0) return pre + "has no dropout (training mode)";
  return std::nullopt;
}

TileTensor mla_query_rows(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                          const TileTensor& x) {
  ComputeConfig lin = r.qkv;
  lin.output = r.act;
  TileTensor q = linear_bias(dev, "ttnn.linear", x, w.wq, w.bq, lin, r.grid, 0);
  if (!w.has_q_b) return q;
  RmsNormAttributes na;
  na.epsilon = static_cast<float>(spec.mla->eps);
  na.compute = r.qk_norm;
  return linear_bias(dev, "ttnn.linear", run_rms_norm(dev, q, &w.q_norm, na), w.wq_b, std::nullopt, lin, r.grid, 0);
}

TileTensor mla_latent_rows(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& x) {
  ComputeConfig lin = r.qkv;
  lin.output = r.act;
  return linear_bias(dev, "ttnn.linear", x, w.wkv, w.bkv, lin, r.grid, 0);
}

TileTensor mla_norm_latent(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                           const TileTensor& c) {
  RmsNormAttributes na;
  na.epsilon = static_cast<float>(spec.mla->eps);
  na.compute = r.qk_norm;
  return run_rms_norm(dev, c, &w.kv_norm, na);
}

TileTensor mla_absorb(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& q_nope) {
  MatmulAttributes at;
  at.compute = r.qkv;
  at.compute.output = r.act;
  at.grid = r.grid;
  return run_matmul(dev, "ttnn.matmul", q_nope, w.w_kb, at);
}

TileTensor mla_expand(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const TileTensor& latent) {
  MatmulAttributes at;
  at.compute = r.wo;
  at.compute.output = r.act;
  at.grid = r.grid;
  return run_matmul(dev, "ttnn.matmul", latent, w.w_vb, at);
}

namespace {

// The query in the latent space, q [1, H, Lp, kl + dr]: projections, heads,
// rotary on q_pe, q_nope absorbed through W_kb, the two concatenated.
TileTensor mla_query(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                     const TileTensor& x, const RotaryTables& t, const TileTensor& trans) {
  const Mla& m = *spec.mla;
  const int64_t H = spec.num_heads, dq = spec.head_dim;
  const TileTensor q = mla_query_rows(dev, r, w, spec, x);
  const TileTensor q_nope = mla_head_columns(dev, "ttnn.slice", q, H, dq, 0, m.nope_dim);
  RotaryAttributes ra;
  ra.compute = r.rotary;
  const TileTensor q_pe =
      run_rotary_llama(dev, mla_head_columns(dev, "ttnn.slice", q, H, dq, m.nope_dim, m.rope_dim), t.cos, t.sin, trans, ra);
  return mla_concat_last(dev, mla_absorb(dev, r, w, q_nope), q_pe);
}

// The latent rows kvpe [1, 1, Lp, kl + dr]: [rms_norm(c) | rotary(k_pe)].
TileTensor mla_latent(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                      const TileTensor& x, const RotaryTables& t, const TileTensor& trans) {
  const Mla& m = *spec.mla;
  const TileTensor kv = mla_latent_rows(dev, r, w, x);
  const TileTensor c = mla_norm_latent(dev, r, w, spec, mla_head_columns(dev, "ttnn.slice", kv, 1, 0, 0, m.kv_lora_rank));
  RotaryAttributes ra;
  ra.compute = r.rotary;
  const TileTensor kr = run_rotary_llama(dev, mla_head_columns(dev, "ttnn.slice", kv, 1, 0, m.kv_lora_rank, m.rope_dim),
                                         t.cos, t.sin, trans, ra);
  return mla_concat_last(dev, c, kr);
}

}  // namespace

MlaUserOut mla_prefill_user(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                            const TileTensor& x, const RopeTable& rope, int64_t b, TileTensor* cache) {
  const Mla& m = *spec.mla;
  const int64_t Lp = x.rows;
  const RotaryTables t = rotary_prefill_tables(rope, b, Lp);
  const TileTensor trans = rotary_llama_trans_mat(DataFormat::Bfloat16);
  const TileTensor q = run_typecast(dev, mla_query(dev, r, w, spec, x, t, trans), r.q_sdpa);
  const TileTensor kvpe = run_typecast(dev, mla_latent(dev, r, w, spec, x, t, trans), r.cache);
  if (cache) run_fill_cache(dev, *cache, kvpe, b, 0);
  SdpaConfig c;
  c.q_chunk_size = c.k_chunk_size = std::min(SdpaRecipe::chunk(Lp), q.prows);
  c.exp_approx_mode = r.exp_approx_prefill;
  c.is_causal = true;
  c.scale = static_cast<float>(spec.scale);
  c.head_dim_v = m.kv_lora_rank;
  c.compute = r.sdpa_prefill;
  c.compute.output = r.q_sdpa;
  const TileTensor latent = run_flash_mla_prefill(dev, "ttnn.transformer.flash_mla_prefill", q, kvpe, nullptr, c);
  MlaUserOut o;
  o.ctx = concat_heads(dev, mla_expand(dev, r, w, latent));
  ComputeConfig out = r.wo;
  out.output = r.out_prefill;
  o.out = w.has_out ? linear_bias(dev, "ttnn.linear", o.ctx, w.wo, w.bo, out, r.grid, 0) : o.ctx;
  return o;
}

AttentionResult run_mla_prefill(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                                const AttentionInputs& in, const RunOptions& opt) {
  const int64_t B = in.query.dim(0), L = in.query.dim(1), Lp = padded_prefill_len(L), E_out = spec.out_dim();
  const int64_t ctx_w = spec.num_heads * spec.head_dim_v;
  dev.set_memory(MemoryKind::DRAM);
  dev.set_resident(w.all());
  const RopeTable rope = rope_table(spec, in);
  AttentionResult res;
  res.output = Tensor(DType::F32, {B, L, E_out});
  Tensor ctx(DType::F32, {B, L, ctx_w});
  for (int64_t b = 0; b < B; ++b) {
    const MlaUserOut o = mla_prefill_user(dev, r, w, spec, user_rows(in.query, b, Lp, r.act), rope, b, nullptr);
    const std::vector<float> y = first_rows(o.out, L), c = first_rows(o.ctx, L);
    std::copy(y.begin(), y.end(), res.output.data<float>() + b * L * E_out);
    std::copy(c.begin(), c.end(), ctx.data<float>() + b * L * ctx_w);
  }
  if (opt.collect_stages) res.stages = {{"context", ctx}, {"output", res.output}};
  return res;
}

}  // namespace mha::ttsim
