#include "backends/ttsim/ttsim_pipeline.h"

#include <algorithm>

#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "backends/ttsim/ops/eltwise/eltwise.h"
#include "backends/ttsim/ops/matmul/matmul.h"
#include "backends/ttsim/ops/softmax/softmax.h"
#include "model/heads.h"
#include "model/mask.h"

namespace mha::ttsim {

namespace {

// One run's shapes: query rows L, key rows S (+ extra key rows = St), H
// query heads over Hkv kv heads (`group` query heads share one), widths
// dh (query/key) and dv (value).
struct Dims {
  int64_t B, L, S, St, H, Hkv, dh, dv, group;
};

// What every op of one run needs.
struct Pass {
  TtDevice& dev;
  const Recipe& r;
  const DeviceWeights& w;
  Dims d;
};

// Host-side values of the data-movement ops, read straight from tile
// storage (a row of a TileTensor matrix is contiguous) in runs of d floats.

// [B, H, rows_total, d] row-major (model/heads.h): query head h takes kv
// head h / group, columns from c0 of src [B, rows, *] (a row of a
// TileTensor matrix is contiguous, pcols apart), then the extra rows.
std::vector<float> split_rows(const TileTensor& src, int64_t c0, const Dims& dm, int64_t rows, int64_t rows_total,
                              int64_t heads, int64_t group, int64_t d, const float* extra_row) {
  std::vector<float> out(static_cast<size_t>(dm.B * heads * rows_total * d));
  mha::split_heads(src.data.data() + c0, src.prows * src.pcols, src.pcols, dm.B, rows, rows_total, heads, group, d,
              extra_row, out.data());
  return out;
}

// [n, rows, cols] -> [n, cols, rows] row-major.
std::vector<float> transpose_last2(const std::vector<float>& v, int64_t n, int64_t rows, int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t m = 0; m < n; ++m) {
    const float* s = v.data() + m * rows * cols;
    float* t = out.data() + m * rows * cols;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = s[r * cols + c];
  }
  return out;
}

// A data-movement op: `values` become the result of `shape` in `out`.
TileTensor data_move(const Pass& p, const std::string& op, const TileTensor& in, const std::vector<float>& values,
                const Shape& shape, DataFormat out) {
  return run_data_movement(p.dev, op, in, values, DataMovementAttributes{out, shape});
}

std::vector<float> row_values(const std::optional<TileTensor>& t) {
  return t ? to_row_major(*t) : std::vector<float>();
}

// ttnn.matmul / ttnn.linear with compute config c on the recipe's grid.
TileTensor matmul(const Pass& p, const std::string& op, const TileTensor& a, const TileTensor& b, const ComputeConfig& c,
                  bool bias = false) {
  MatmulAttributes at;
  at.compute = c;
  at.grid = p.r.grid;
  at.core_grid = p.r.core_grid;
  at.bias = bias;
  return run_matmul(p.dev, op, a, b, at);
}

// The recipe's add / multiply attributes with output `out`.
EltwiseAttributes eltwise(const Recipe& r, DataFormat out) {
  return eltwise_attributes(out, r.fp32_dest, r.bfp8_pack_precise, r.linear.arch, r.eltwise);
}

// ttnn.linear (book, fused: the bias inside, one program) or `@` then `+`
// (ttnn_mha, and the book's out_proj bias: a separate ttnn.add).
//   x [B, rows, in] @ w [in, out] (+ b [1, out]) -> [B, rows, out]
TileTensor linear(const Pass& p, const TileTensor& x, const TileTensor& w, const std::optional<TileTensor>& b,
                  DataFormat out, bool bias_inside) {
  const std::string op = p.r.pipeline == OpSequence::TtnnMha ? "ttnn.matmul" : "ttnn.linear";
  ComputeConfig c = p.r.linear;
  c.output = out;
  TileTensor y = matmul(p, op, x, w, c, b && bias_inside);
  if (!b) return y;
  Muted m(p.dev, bias_inside);
  return run_add(p.dev, bias_inside ? op : "ttnn.add", y, *b, eltwise(p.r, out));
}

struct Heads {
  TileTensor q;    // [B, H, L, dh]
  TileTensor k_t;  // [B, H, dh, St]: keys transposed, kv heads repeated per query head
  TileTensor v;    // [B, H, St, dv]
};

// The k^T and v values from a key/value source [B, S, *] whose keys start
// at column ck and values at cv; the extra key rows (bias_k / bias_v, then
// add_zero_attn's zeros) appended as ttnn.concat would.
std::vector<float> key_values_t(const Pass& p, const TileTensor& src, int64_t ck) {
  const Dims& d = p.d;
  const std::vector<float> bias = row_values(p.w.bias_k);
  std::vector<float> k = split_rows(src, ck, d, d.S, d.St, d.H, d.group, d.dh, bias.empty() ? nullptr : bias.data());
  return transpose_last2(k, d.B * d.H, d.St, d.dh);
}
std::vector<float> value_values(const Pass& p, const TileTensor& src, int64_t cv) {
  const Dims& d = p.d;
  const std::vector<float> bias = row_values(p.w.bias_v);
  return split_rows(src, cv, d, d.S, d.St, d.H, d.group, d.dv, bias.empty() ? nullptr : bias.data());
}

// ttnn.reshape + ttnn.permute of each projection (book, ttnn_mha); each
// op's program and memory check see its own input:
//   q [B, L, H*dh] -> [B, H, L, dh], k [B, S, Hkv*dh] -> [B, H, dh, St],
//   v [B, S, Hkv*dv] -> [B, H, St, dv]
Heads split_heads(const Pass& p, const TileTensor& q, const TileTensor& k, const TileTensor& v) {
  const Dims& d = p.d;
  p.dev.program("ttnn.reshape", "q heads", {&q});
  p.dev.program("ttnn.reshape", "k heads", {&k});
  p.dev.program("ttnn.reshape", "v heads", {&v});
  Heads h;
  h.q = data_move(p, "ttnn.permute", q, split_rows(q, 0, d, d.L, d.L, d.H, 1, d.dh, nullptr), {d.B, d.H, d.L, d.dh},
                p.r.qkv_out);
  h.k_t = data_move(p, "ttnn.permute", k, key_values_t(p, k, 0), {d.B, d.H, d.dh, d.St}, p.r.qkv_out);
  h.v = data_move(p, "ttnn.permute", v, value_values(p, v, 0), {d.B, d.H, d.St, d.dv}, p.r.qkv_out);
  return h;
}

// ttnn.transformer.split_query_key_value_and_split_heads (fused): one
// program over qkv [B, L, H*dh + Hkv*dh + Hkv*dv] (S = L) giving the three
// tensors above.
Heads split_heads_fused(const Pass& p, const TileTensor& qkv) {
  const Dims& d = p.d;
  Heads h;
  h.q = data_move(p, "ttnn.transformer.split_query_key_value_and_split_heads", qkv,
                split_rows(qkv, 0, d, d.L, d.L, d.H, 1, d.dh, nullptr), {d.B, d.H, d.L, d.dh}, p.r.qkv_out);
  Muted m(p.dev);
  h.k_t = data_move(p, "ttnn.permute", qkv, key_values_t(p, qkv, d.H * d.dh), {d.B, d.H, d.dh, d.St}, p.r.qkv_out);
  h.v = data_move(p, "ttnn.permute", qkv, value_values(p, qkv, d.H * d.dh + d.Hkv * d.dh), {d.B, d.H, d.St, d.dv},
                p.r.qkv_out);
  return h;
}

// ttnn.matmul: q [B, H, L, dh] @ k^T [B, H, dh, St] -> scores [B, H, L, St].
TileTensor attention_scores(const Pass& p, const Heads& h) {
  ComputeConfig c = p.r.matmul;
  c.output = p.r.scores_out;
  return matmul(p, "ttnn.matmul", h.q, h.k_t, c);
}

// ttnn.multiply(scores, scale), then ttnn.add of the given additive mask
// [Bm, Hm, 1 or L, St] (one row is broadcast over the query rows, as
// ttnn.add broadcasts a row tile), then the causal / window mask:
// torch.triu(ones, diagonal=1) (and the window's lower band) on the host in
// the activation dtype, times MINUS_INFINITY = -1e9 on the device, added.
//   scores [B, H, L, St] -> masked [B, H, L, St]
TileTensor scale_and_mask(const Pass& p, const TileTensor& scores, const AttentionSpec& spec,
                          const AttentionInputs& in) {
  const Recipe& r = p.r;
  TileTensor masked =
      run_multiply_scalar(p.dev, "ttnn.multiply", scores, static_cast<float>(spec.scale), eltwise(r, r.scores_out));
  if (in.mask) {
    const TileTensor mt = to_tile_layout(*in.mask, r.act);
    masked = run_add(p.dev, "ttnn.add", masked, mt, eltwise(r, r.scores_out));
  }
  const MaskRule rule(spec);
  if (rule.causal || rule.window > 0) {
    const int64_t L = p.d.L, St = p.d.St;
    std::vector<float> tri(static_cast<size_t>(L * St), 0.0f);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < St; ++j) tri[i * St + j] = rule.visible(i, j) ? 0.0f : 1.0f;
    const TileTensor tri_t = to_tile_layout(tri.data(), {1, 1, L, St}, r.act);
    const TileTensor mask_t = run_multiply_scalar(p.dev, "ttnn.multiply", tri_t, -1e9f, eltwise(r, r.act));
    masked = run_add(p.dev, "ttnn.add", masked, mask_t, eltwise(r, r.scores_out));
  }
  return masked;
}

// ttnn.transformer.attention_softmax_'s attributes.
struct AttentionSoftmaxAttributes {
  int64_t head_size = 0;
  template <class V>
  void fields(V& v) {
    v("head_size", head_size, "the scale's head size", fields::kDerived);
  }
};

struct Softmaxed {
  TileTensor masked;  // [B, H, L, St] scaled and masked scores
  TileTensor probs;   // [B, H, L, St] softmax over St
};

// ttnn.softmax(dim=-1) after the separate scale and mask ops (book, ttnn_mha).
Softmaxed softmax(const Pass& p, const TileTensor& scores, const AttentionSpec& spec, const AttentionInputs& in) {
  Softmaxed s;
  s.masked = scale_and_mask(p, scores, spec, in);
  s.probs = run_softmax(p.dev, "ttnn.softmax", s.masked, SoftmaxAttributes{p.r.softmax});
  return s;
}

// ttnn.transformer.attention_softmax_ (fused): scale, mask and softmax in
// one program, in place (no output buffer beyond the scores).
Softmaxed attention_softmax_(const Pass& p, const TileTensor& scores, const AttentionSpec& spec,
                             const AttentionInputs& in) {
  const char* op = "ttnn.transformer.attention_softmax_";
  p.dev.program(op, program_key(AttentionSoftmaxAttributes{p.d.dh}), {&scores});
  p.dev.check_memory(op, {}, scores.shape, scores.format);
  Muted m(p.dev);
  Softmaxed s;
  s.masked = scale_and_mask(p, scores, spec, in);
  s.probs = run_softmax(p.dev, op, s.masked, SoftmaxAttributes{p.r.softmax});
  return s;
}

// ttnn.matmul: probs [B, H, L, St] @ v [B, H, St, dv] -> [B, H, L, dv].
TileTensor attention_context(const Pass& p, const TileTensor& probs, const TileTensor& v) {
  ComputeConfig c = p.r.matmul;
  c.output = p.r.ctx_out;
  return matmul(p, "ttnn.matmul", probs, v, c);
}

// ttnn.permute + ttnn.reshape (book, ttnn_mha) or
// ttnn.transformer.concatenate_heads (fused):
//   ctx [B, H, L, dv] -> context [B, L, H*dv]
TileTensor concatenate_heads(const Pass& p, const TileTensor& ctx) {
  const Dims& d = p.d;
  const int64_t width = d.H * d.dv;
  std::vector<float> values(static_cast<size_t>(d.B * d.L * width));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const float* s = ctx.matrix(b * d.H + h);
      for (int64_t i = 0; i < d.L; ++i) std::copy_n(s + i * ctx.pcols, d.dv, &values[(b * d.L + i) * width + h * d.dv]);
    }
  const bool fused = p.r.fused_qkv;
  TileTensor context = data_move(p, fused ? "ttnn.transformer.concatenate_heads" : "ttnn.permute", ctx, values,
                               {d.B, d.L, width}, p.r.ctx_out);
  if (!fused) p.dev.program("ttnn.reshape", "context", {&ctx});
  return context;
}

// Stages k [B, Hkv, St, dh] and v [B, Hkv, St, dv], per kv head (the first
// query head of each group), as the reference names them.
void kv_stages(const Dims& d, const Heads& h, Tensor& ks, Tensor& vs) {
  ks = Tensor(DType::F32, {d.B, d.Hkv, d.St, d.dh});
  vs = Tensor(DType::F32, {d.B, d.Hkv, d.St, d.dv});
  float* kp = ks.data<float>();
  float* vp = vs.data<float>();
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t g = 0; g < d.Hkv; ++g) {
      const int64_t m = b * d.H + g * d.group, o = b * d.Hkv + g;
      const float* kt = h.k_t.matrix(m);
      for (int64_t dd = 0; dd < d.dh; ++dd)
        for (int64_t j = 0; j < d.St; ++j) kp[(o * d.St + j) * d.dh + dd] = kt[dd * h.k_t.pcols + j];
      const float* v = h.v.matrix(m);
      for (int64_t j = 0; j < d.St; ++j) std::copy_n(v + j * h.v.pcols, d.dv, vp + (o * d.St + j) * d.dv);
    }
}

bool same_storage(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && a.raw() == b.raw(); }

}  // namespace

AttentionResult run_pipeline(TtDevice& dev, const Recipe& r, const DeviceWeights& w, const AttentionSpec& spec,
                             const AttentionInputs& in, const RunOptions& opt) {
  Dims d;
  d.B = in.query.dim(0), d.L = in.query.dim(1), d.S = in.key.dim(1), d.St = d.S + spec.extra_keys();
  d.H = spec.num_heads, d.Hkv = spec.num_kv_heads, d.dh = spec.head_dim, d.dv = spec.head_dim_v;
  d.group = d.H / d.Hkv;
  const Pass p{dev, r, w, d};
  dev.set_memory(r.memory);
  dev.set_resident(w.all());
  const bool fused = r.fused_qkv;

  // Host inputs (ttnn.from_torch); self-attention passes one tensor thrice.
  const TileTensor xq = to_tile_layout(in.query, r.act);
  Heads h;
  if (fused) {
    h = split_heads_fused(p, linear(p, xq, w.wqkv, w.bqkv, r.qkv_out, true));
  } else {
    const bool book = r.pipeline == OpSequence::Book;
    std::optional<TileTensor> xk, xv;
    if (!same_storage(in.key, in.query)) xk = to_tile_layout(in.key, r.act);
    const TileTensor& key_x = xk ? *xk : xq;
    const TileTensor* value_x = &key_x;
    if (!same_storage(in.value, in.key)) value_x = same_storage(in.value, in.query) ? &xq : &xv.emplace(to_tile_layout(in.value, r.act));
    const TileTensor q = linear(p, xq, w.wq, w.bq, r.qkv_out, book);
    const TileTensor k = linear(p, key_x, w.wk, w.bk, r.qkv_out, book);
    const TileTensor v = linear(p, *value_x, w.wv, w.bv, r.qkv_out, book);
    h = split_heads(p, q, k, v);
  }
  const TileTensor scores = attention_scores(p, h);
  const Softmaxed sm = fused ? attention_softmax_(p, scores, spec, in) : softmax(p, scores, spec, in);
  const TileTensor context = concatenate_heads(p, attention_context(p, sm.probs, h.v));
  const TileTensor out = spec.out ? linear(p, context, w.wo, w.bo, r.out_out, fused) : context;

  AttentionResult res;
  res.output = to_tensor(out);
  if (opt.need_weights) res.weights = to_tensor(sm.probs);
  if (opt.collect_stages) {
    Tensor ks, vs;
    kv_stages(d, h, ks, vs);
    res.stages = {{"q", to_tensor(h.q)},
                  {"k", ks},
                  {"v", vs},
                  {"scores", to_tensor(scores)},
                  {"masked_scores", to_tensor(sm.masked)},
                  {"weights", to_tensor(sm.probs)},
                  {"context", to_tensor(context)},
                  {"output", res.output}};
  }
  return res;
}

}  // namespace mha::ttsim
