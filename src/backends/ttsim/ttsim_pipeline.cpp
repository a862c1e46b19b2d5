#include "backends/ttsim/ttsim_pipeline.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace mha::ttsim {

namespace {

bool block_float(DataFormat f) { return bfp_magnitude_bits(f) > 0; }

// (out, in) float32 weight -> the (in, out) operand the matmul sees; the
// transpose (transpose_b, or the seed's (in, out) storage) is exact.
std::vector<float> transposed(const Tensor& w) {
  const int64_t o = w.dim(0), i = w.dim(1);
  const float* p = w.data<float>();
  std::vector<float> t(static_cast<size_t>(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c) t[c * o + r] = p[r * i + c];
  return t;
}

TileTensor weight_tile(const Tensor& w, DataFormat f) { return to_tile_layout(transposed(w).data(), {w.dim(1), w.dim(0)}, f); }
TileTensor row_tile(const Tensor& b, DataFormat f) { return to_tile_layout(b.data<float>(), {1, b.numel()}, f); }

// One fused TT-NN op's inner steps register no programs of their own.
struct Muted {
  TtDevice& d;
  explicit Muted(TtDevice& dev) : d(dev) { d.set_muted(true); }
  ~Muted() { d.set_muted(false); }
};

}  // namespace

Recipe make_recipe(const std::string& variant, const TtOptions& o) {
  Recipe r;
  r.pipeline = variant == "ttnn_mha" || variant == "ttnn_mha_fused" ? variant : "book";
  r.fused_qkv = r.pipeline == "ttnn_mha_fused";
  const DataFormat dt = o.dtype.value_or(r.fused_qkv ? DataFormat::Bfp8_b : DataFormat::Bfloat16);
  // The fused seed keeps hidden states, weights, scores and the output in
  // bfloat16 and asks for its `dtype` on the QKV and context matmuls only.
  r.act = r.fused_qkv ? DataFormat::Bfloat16 : dt;
  r.qkv_out = r.ctx_out = dt;
  r.scores_out = r.out_out = r.act;
  r.fp32_dest = o.fp32_dest_acc_en.value_or(false);
  ComputeConfig mm;
  mm.fp32_dest_acc_en = r.fp32_dest;
  mm.math_approx_mode = o.math_approx_mode.value_or(true);
  mm.numerics = o.numerics;
  // `@` without core_grid: HiFi2 unless both operands are block float; a
  // core_grid (seed 000, the fused seed) selects LoFi.
  MathFidelity mm_default = r.pipeline == "ttnn_mha" && !block_float(r.act) ? MathFidelity::HiFi2 : MathFidelity::LoFi;
  mm.math_fidelity = o.math_fidelity.value_or(mm_default);
  r.linear = r.matmul = mm;
  r.softmax = softmax_default_config();
  r.softmax.math_fidelity = o.math_fidelity.value_or(MathFidelity::HiFi4);
  r.softmax.math_approx_mode = o.math_approx_mode.value_or(true);
  r.softmax.fp32_dest_acc_en = r.fp32_dest;
  r.softmax.numerics = o.numerics;
  r.softmax.output = r.scores_out;
  r.softmax.legacy_sfpu_recip = true;  // what seed 000's hardware run computed
  const int dy = o.device.grid_y, dx = o.device.grid_x;
  Grid g{dy, dx};
  if (r.pipeline == "book") g = {std::min(8, dy), std::min(8, dx)};
  if (r.fused_qkv) g = {std::min(8, dy), std::min(12, dx)};
  r.grid = {o.grid_y.value_or(g.y), o.grid_x.value_or(g.x)};
  r.memory = o.memory.value_or(r.pipeline == "ttnn_mha" ? MemoryKind::DRAM : MemoryKind::L1);
  return r;
}

nlohmann::json recipe_json(const Recipe& r) {
  return {{"pipeline", r.pipeline},
          {"dtype", format_name(r.act)},
          {"qkv_dtype", format_name(r.qkv_out)},
          {"context_dtype", format_name(r.ctx_out)},
          {"matmul_fidelity", fidelity_name(r.matmul.math_fidelity)},
          {"softmax_fidelity", fidelity_name(r.softmax.math_fidelity)},
          {"fp32_dest_acc_en", r.fp32_dest},
          {"math_approx_mode", r.softmax.math_approx_mode},
          {"memory_config", memory_name(r.memory)},
          {"core_grid", {r.grid.y, r.grid.x}},
          {"numerics", numerics_name(r.matmul.numerics)}};
}

std::vector<const TileTensor*> DeviceWeights::all() const {
  std::vector<const TileTensor*> v;
  for (const TileTensor* t : {&wq, &wk, &wv, &wqkv, &wo})
    if (!t->data.empty()) v.push_back(t);
  for (const auto* t : {&bq, &bk, &bv, &bqkv, &bo, &bias_k, &bias_v})
    if (*t) v.push_back(&**t);
  return v;
}

DeviceWeights convert_weights(const AttentionSpec& spec, const Recipe& r) {
  DeviceWeights w;
  const DataFormat f = r.act;
  if (r.fused_qkv) {
    // ttnn.concat([query_weight, key_weight, value_weight], dim=-1): (in, 3h).
    const int64_t in = spec.q_in(), hq = spec.q.weight.dim(0), hk = spec.k.weight.dim(0), hv = spec.v.weight.dim(0);
    std::vector<float> cat(static_cast<size_t>(in * (hq + hk + hv))), bias(static_cast<size_t>(hq + hk + hv), 0.0f);
    int64_t off = 0;
    for (const Projection* p : {&spec.q, &spec.k, &spec.v}) {
      const int64_t n = p->weight.dim(0);
      std::vector<float> t = transposed(p->weight);
      for (int64_t i = 0; i < in; ++i) std::copy_n(&t[i * n], n, &cat[i * (hq + hk + hv) + off]);
      if (p->bias) std::copy_n(p->bias->data<float>(), n, &bias[off]);
      off += n;
    }
    w.wqkv = to_tile_layout(cat.data(), {in, hq + hk + hv}, f);
    w.bqkv = to_tile_layout(bias.data(), {1, hq + hk + hv}, f);
  } else {
    w.wq = weight_tile(spec.q.weight, f);
    w.wk = weight_tile(spec.k.weight, f);
    w.wv = weight_tile(spec.v.weight, f);
    if (spec.q.bias) w.bq = row_tile(*spec.q.bias, f);
    if (spec.k.bias) w.bk = row_tile(*spec.k.bias, f);
    if (spec.v.bias) w.bv = row_tile(*spec.v.bias, f);
  }
  if (spec.out) {
    w.wo = weight_tile(spec.out->weight, f);
    if (spec.out->bias) w.bo = row_tile(*spec.out->bias, f);
  }
  if (spec.bias_k) w.bias_k = row_tile(*spec.bias_k, f);
  if (spec.bias_v) w.bias_v = row_tile(*spec.bias_v, f);
  return w;
}

void check_supported(const AttentionSpec& spec, const AttentionInputs& in) {
  if (in.training && spec.dropout > 0.0)
    throw InputError("tt-sim: variant " + spec.variant + ": dropout in training (p = " + std::to_string(spec.dropout) +
                     ") is not supported on tt-sim (ttnn.experimental.dropout's device RNG is not modelled); "
                     "run in eval mode or on the cpu/reference backend");
  if (spec.variant == "ttnn_mha_fused" && (spec.extra_keys() > 0 || spec.num_kv_heads != spec.num_heads))
    throw InputError("tt-sim: ttnn_mha_fused supports neither extra key rows nor grouped kv heads");
}

AttentionResult run_pipeline(TtDevice& dev, const Recipe& r, const DeviceWeights& w, const AttentionSpec& spec,
                             const AttentionInputs& in, const RunOptions& opt) {
  const int64_t B = in.query.dim(0), L = in.query.dim(1), S = in.key.dim(1);
  const int64_t H = spec.num_heads, Hkv = spec.num_kv_heads, dh = spec.head_dim, dv = spec.head_dim_v;
  const int64_t St = S + spec.extra_keys(), group = H / Hkv;
  const bool fused = r.fused_qkv, book = r.pipeline == "book";
  dev.set_memory(r.memory);
  dev.set_resident(w.all());
  const std::string mm_op = r.pipeline == "ttnn_mha" ? "ttnn.matmul" : "ttnn.linear";

  // A projection: matmul, then the bias (fused into ttnn.linear, or the
  // seed's separate `+` / ttnn.add).
  auto linear = [&](const TileTensor& x, const TileTensor& wt, const std::optional<TileTensor>& b, DataFormat out,
                    bool bias_fused) {
    ComputeConfig c = r.linear;
    c.output = out;
    TileTensor y = op_matmul(dev, mm_op, x, wt, c, r.grid);
    if (!b) return y;
    if (bias_fused) {
      Muted m(dev);
      return op_add(dev, mm_op, y, *b, out, r.fp32_dest);
    }
    return op_add(dev, "ttnn.add", y, *b, out, r.fp32_dest);
  };

  // Projections, row-major [B, L or S, heads * d].
  std::vector<float> q_rm, k_rm, v_rm;
  const int64_t qw = H * dh, kw = Hkv * dh, vw = Hkv * dv;
  const TileTensor xq = to_tile_layout(in.query, r.act);
  std::optional<TileTensor> qkv;
  if (fused) {
    qkv = linear(xq, w.wqkv, w.bqkv, r.qkv_out, true);
    std::vector<float> all = to_row_major(*qkv);
    const int64_t width = qw + kw + vw;
    q_rm.resize(B * L * qw);
    k_rm.resize(B * S * kw);
    v_rm.resize(B * S * vw);
    for (int64_t t = 0; t < B * L; ++t) {
      std::copy_n(&all[t * width], qw, &q_rm[t * qw]);
      std::copy_n(&all[t * width + qw], kw, &k_rm[t * kw]);
      std::copy_n(&all[t * width + qw + kw], vw, &v_rm[t * vw]);
    }
  } else {
    const TileTensor xk = to_tile_layout(in.key, r.act), xv = to_tile_layout(in.value, r.act);
    q_rm = to_row_major(linear(xq, w.wq, w.bq, r.qkv_out, book));
    k_rm = to_row_major(linear(xk, w.wk, w.bk, r.qkv_out, book));
    v_rm = to_row_major(linear(xv, w.wv, w.bv, r.qkv_out, book));
  }

  // Heads: q [B, H, L, dh], k^T [B, H, dh, St], v [B, H, St, dv]; extra key
  // rows (bias_k/bias_v, add_zero_attn) appended and kv heads repeated for
  // grouped queries, as ttnn.concat / repeat would (data movement only).
  std::vector<float> qh(B * H * L * dh), kt(B * H * dh * St, 0.0f), vh(B * H * St * dv, 0.0f);
  std::vector<float> bk = w.bias_k ? to_row_major(*w.bias_k) : std::vector<float>();
  std::vector<float> bv = w.bias_v ? to_row_major(*w.bias_v) : std::vector<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t d = 0; d < dh; ++d) qh[((b * H + h) * L + i) * dh + d] = q_rm[(b * L + i) * qw + h * dh + d];
      for (int64_t j = 0; j < St; ++j) {
        for (int64_t d = 0; d < dh; ++d)
          kt[((b * H + h) * dh + d) * St + j] =
              j < S ? k_rm[(b * S + j) * kw + g * dh + d] : (j == S && w.bias_k ? bk[g * dh + d] : 0.0f);
        for (int64_t d = 0; d < dv; ++d)
          vh[((b * H + h) * St + j) * dv + d] =
              j < S ? v_rm[(b * S + j) * vw + g * dv + d] : (j == S && w.bias_v ? bv[g * dv + d] : 0.0f);
      }
    }
  const TileTensor q_src = to_tile_layout(q_rm.data(), {B, L, qw}, r.qkv_out);
  if (!fused) {
    for (const char* n : {"q", "k", "v"}) dev.program("ttnn.reshape", std::string(n) + " heads", {&q_src});
  }
  const std::string split_op = fused ? "ttnn.transformer.split_query_key_value_and_split_heads" : "ttnn.permute";
  TileTensor q = op_move(dev, split_op, fused ? *qkv : q_src, qh, {B, H, L, dh}, r.qkv_out);
  TileTensor k_t, v;
  {
    std::optional<Muted> m;
    if (fused) m.emplace(dev);
    k_t = op_move(dev, "ttnn.permute", q_src, kt, {B, H, dh, St}, r.qkv_out);
    v = op_move(dev, "ttnn.permute", q_src, vh, {B, H, St, dv}, r.qkv_out);
  }

  ComputeConfig mmc = r.matmul;
  mmc.output = r.scores_out;
  TileTensor scores = op_matmul(dev, "ttnn.matmul", q, k_t, mmc, r.grid);

  // Scale and mask: separate ttnn ops, or inside attention_softmax_.
  const std::string sm_op = fused ? "ttnn.transformer.attention_softmax_" : "ttnn.softmax";
  TileTensor masked;
  {
    std::optional<Muted> m;
    if (fused) m.emplace(dev);
    masked = op_mul_scalar(dev, "ttnn.multiply", scores, static_cast<float>(spec.scale), r.scores_out, r.eltwise,
                           r.fp32_dest);
    if (in.mask) {
      TileTensor mt = to_tile_layout(*in.mask, r.act);
      masked = op_add(dev, "ttnn.add", masked, mt, r.scores_out, r.fp32_dest);
    }
    if (spec.causal || spec.window > 0) {
      // torch.triu(ones, diagonal=1) (and the window's lower band) on the
      // host in bf16, times MINUS_INFINITY = -1e9 on the device.
      std::vector<float> tri(L * St, 0.0f);
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < St; ++j)
          tri[i * St + j] = (spec.causal && j > i) || (spec.window > 0 && j < i - spec.window + 1) ? 1.0f : 0.0f;
      TileTensor tri_t = to_tile_layout(tri.data(), {1, 1, L, St}, r.act);
      TileTensor mask_t = op_mul_scalar(dev, "ttnn.multiply", tri_t, -1e9f, r.act, r.eltwise, r.fp32_dest);
      masked = op_add(dev, "ttnn.add", masked, mask_t, r.scores_out, r.fp32_dest);
    }
  }
  TileTensor probs;
  if (fused) {
    // In place (attention_softmax_): no output buffer beyond the scores.
    dev.program(sm_op, "head_size=" + std::to_string(dh), {&scores});
    dev.check_memory(sm_op, {}, scores.shape, scores.format);
    Muted m(dev);
    probs = op_softmax(dev, sm_op, masked, r.softmax);
  } else {
    probs = op_softmax(dev, sm_op, masked, r.softmax);
  }

  mmc.output = r.ctx_out;
  TileTensor ctx = op_matmul(dev, "ttnn.matmul", probs, v, mmc, r.grid);
  Shape cs;
  const int perm[4] = {0, 2, 1, 3};
  std::vector<float> ctx_rm = permute4(to_row_major(ctx), {B, H, L, dv}, perm, cs);
  TileTensor context =
      op_move(dev, fused ? "ttnn.transformer.concatenate_heads" : "ttnn.permute", ctx, ctx_rm, {B, L, H * dv}, r.ctx_out);
  if (!fused) dev.program("ttnn.reshape", "context", {&ctx});

  TileTensor out = context;
  if (spec.out) out = linear(context, w.wo, w.bo, r.out_out, fused);

  AttentionResult res;
  res.output = to_tensor(out);
  if (opt.need_weights) res.weights = to_tensor(probs);
  if (opt.collect_stages) {
    // k and v per kv head (the first query head of each group), as the
    // reference names them.
    std::vector<float> kt_rm = to_row_major(k_t), v_rm2 = to_row_major(v);
    Tensor ks(DType::F32, {B, Hkv, St, dh}), vs(DType::F32, {B, Hkv, St, dv});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t h = g * group;
        for (int64_t j = 0; j < St; ++j) {
          for (int64_t d = 0; d < dh; ++d)
            ks.data<float>()[((b * Hkv + g) * St + j) * dh + d] = kt_rm[((b * H + h) * dh + d) * St + j];
          for (int64_t d = 0; d < dv; ++d)
            vs.data<float>()[((b * Hkv + g) * St + j) * dv + d] = v_rm2[((b * H + h) * St + j) * dv + d];
        }
      }
    res.stages = {{"q", to_tensor(q)},           {"k", ks},
                  {"v", vs},                     {"scores", to_tensor(scores)},
                  {"masked_scores", to_tensor(masked)}, {"weights", to_tensor(probs)},
                  {"context", to_tensor(context)}, {"output", res.output}};
  }
  return res;
}

}  // namespace mha::ttsim
