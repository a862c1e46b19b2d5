#include "backends/cpu/cpu_plain.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_gemm.h"
#include "model/dropout.h"
#include "model/heads.h"
#include "model/mask.h"

namespace mha::cpu {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The sizes every step below shares: St = S + extra keys, group = H / Hkv.
struct Dims {
  int64_t B, L, St, H, Hkv, dh, dv, group;
};

// q [B, H, L, dh], k [B, Hkv, St, dh], v [B, Hkv, St, dv]: the plan's
// projections split per head (bias_k / bias_v as the extra key row).
struct Heads {
  Tensor q, k, v;
};

Heads split_projections(const Plan& plan, const Dims& d) {
  Heads h{Tensor(DType::F32, {d.B, d.H, d.L, d.dh}), Tensor(DType::F32, {d.B, d.Hkv, d.St, d.dh}),
          Tensor(DType::F32, {d.B, d.Hkv, d.St, d.dv})};
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  split_heads(plan.q, plan.ldq, d.B, d.L, d.L, d.H, d.dh, static_cast<const float*>(nullptr), h.q.data<float>());
  split_heads(plan.k, plan.ldk, d.B, plan.S, d.St, d.Hkv, d.dh, bias(plan.bias_k), h.k.data<float>());
  split_heads(plan.v, plan.ldv, d.B, plan.S, d.St, d.Hkv, d.dv, bias(plan.bias_v), h.v.data<float>());
  return h;
}

// W [B, H, L, St] = q k^T per head (unscaled).
void scores(ThreadPool& pool, const Dims& d, const Heads& h, float* W) {
  pool.parallel_for(d.B * d.H, [&](int64_t bh, int) {
    const int64_t b = bh / d.H, hh = bh % d.H;
    sgemm(true, d.L, d.St, d.dh, h.q.data<float>() + bh * d.L * d.dh, d.dh,
          h.k.data<float>() + (b * d.Hkv + hh / d.group) * d.St * d.dh, d.dh, 0.0f, W + bh * d.L * d.St, d.St);
  });
}

// W = softcap(scale * W) + mask, -inf where MaskRule hides the key, in
// place; softcap(x) = c * tanh(x / c) when the spec has one (Gemma 2), x
// otherwise.
void scale_and_mask(ThreadPool& pool, const AttentionSpec& spec, const AttentionInputs& in, const Dims& d, float* W) {
  std::vector<float> tmask;
  const float* mask = in.mask ? f32_data(*in.mask, tmask) : nullptr;
  const float scale = static_cast<float>(spec.scale), cap = static_cast<float>(spec.softcap);
  const MaskRule rule(spec);
  pool.parallel_for(d.B * d.H, [&](int64_t bh, int) {
    const int64_t b = bh / d.H, h = bh % d.H;
    // The mask's rows: one per query, or one row every query adds (mask_ld = 0).
    const float* mrow = nullptr;
    int64_t mask_ld = 0;
    if (mask) {
      const int64_t mb = in.mask->dim(0) == 1 ? 0 : b, mh = in.mask->dim(1) == 1 ? 0 : h, ml = in.mask->dim(2);
      mrow = mask + (mb * in.mask->dim(1) + mh) * ml * d.St;
      mask_ld = ml == 1 ? 0 : d.St;
    }
    for (int64_t i = 0; i < d.L; ++i) {
      float* row = W + (bh * d.L + i) * d.St;
      for (int64_t j = 0; j < d.St; ++j) {
        float x = scale * row[j];
        if (cap > 0.0f) x = cap * std::tanh(x / cap);
        x += mrow ? mrow[i * mask_ld + j] : 0.0f;
        if (!rule.visible(i, j)) x = -kInf;
        row[j] = x;
      }
    }
  });
}

// Each row of W -> softmax(row), then training-mode dropout, in place. A
// head's sink (gpt-oss) joins the row's max and denominator and takes no
// value, so the row's weights sum to less than one.
void softmax_rows(ThreadPool& pool, const AttentionSpec& spec, const AttentionInputs& in, const Dims& d, float* W) {
  const bool drop = in.training && spec.dropout > 0.0;
  const float keep_scale = spec.dropout >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - spec.dropout));
  const std::vector<float> sinks = spec.sinks ? spec.sinks->to_f32() : std::vector<float>();
  pool.parallel_for(d.B * d.H, [&](int64_t bh, int) {
    const float* sink = sinks.empty() ? nullptr : &sinks[bh % d.H];
    for (int64_t i = 0; i < d.L; ++i) {
      float* row = W + (bh * d.L + i) * d.St;
      float mx = sink ? *sink : -kInf, sum = 0.0f;
      for (int64_t j = 0; j < d.St; ++j) mx = std::max(mx, row[j]);
      if (sink) sum = std::exp(*sink - mx);
      // A row of -inf keeps mx = -inf and exp(NaN) spreads NaN, as torch does.
      for (int64_t j = 0; j < d.St; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j < d.St; ++j) row[j] /= sum;
      if (drop)
        for (int64_t j = 0; j < d.St; ++j) {
          const uint64_t flat = static_cast<uint64_t>((bh * d.L + i) * d.St + j);
          row[j] = dropout_keep(in.dropout_seed, flat, spec.dropout) ? row[j] * keep_scale : 0.0f;
        }
    }
  });
}

// context [B, L, H*dv] = W v per head.
Tensor context(ThreadPool& pool, const Dims& d, const float* W, const Tensor& v) {
  Tensor ctx(DType::F32, {d.B, d.L, d.H * d.dv});
  pool.parallel_for(d.B * d.H, [&](int64_t bh, int) {
    const int64_t b = bh / d.H, h = bh % d.H;
    sgemm(false, d.L, d.dv, d.St, W + bh * d.L * d.St, d.St, v.data<float>() + (b * d.Hkv + h / d.group) * d.St * d.dv,
          d.dv, 0.0f, ctx.data<float>() + b * d.L * d.H * d.dv + h * d.dv, d.H * d.dv);
  });
  return ctx;
}

}  // namespace

// Shapes: q [B, H, L, dh], k [B, Hkv, St, dh], v [B, Hkv, St, dv];
// scores -> masked -> weights in one [B, H, L, St] buffer (copied out as
// stages on the way); context [B, L, H*dv]; output [B, L, out_dim].
AttentionResult run_plain(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt, Plan& plan,
                          ThreadPool& pool) {
  const int64_t H = spec.num_heads, Hkv = spec.num_kv_heads;
  const Dims d{plan.B, plan.L, plan.S + spec.extra_keys(), H, Hkv, spec.head_dim, spec.head_dim_v, H / Hkv};
  prepare_rope(plan, spec, in);
  project_inputs(pool, plan, F32Inputs(in), 0, d.B);
  const Heads heads = split_projections(plan, d);

  Tensor w(DType::F32, {d.B, d.H, d.L, d.St});
  AttentionResult r;
  // A stage keeps a copy; w.data() then gives w bytes of its own (copy on
  // write), so the in-place steps below do not reach into the stage.
  auto stage = [&](const char* name) {
    if (opt.collect_stages) r.stages.emplace_back(name, w);
  };
  scores(pool, d, heads, w.data<float>());
  stage("scores");
  scale_and_mask(pool, spec, in, d, w.data<float>());
  stage("masked_scores");
  softmax_rows(pool, spec, in, d, w.data<float>());
  Tensor ctx = context(pool, d, w.data<float>(), heads.v);

  if (plan.out) {
    r.output = Tensor(DType::F32, {d.B, d.L, spec.out_dim()});
    linear(pool, *plan.out, ctx.data<float>(), d.H * d.dv, d.B * d.L, r.output.data<float>(), spec.out_dim());
  } else {
    r.output = ctx;
  }
  if (opt.collect_stages) {
    r.stages.emplace_back("weights", w);
    r.stages.emplace_back("context", ctx);
    r.stages.emplace_back("output", r.output);
    // Pipeline order: q, k, v first.
    r.stages.insert(r.stages.begin(), {{"q", heads.q}, {"k", heads.k}, {"v", heads.v}});
  }
  if (opt.need_weights) r.weights = std::move(w);
  return r;
}

}  // namespace mha::cpu
