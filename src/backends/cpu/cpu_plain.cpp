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


// Shapes: q [B, H, L, dh], k [B, Hkv, St, dh], v [B, Hkv, St, dv];
// scores -> masked -> weights in one [B, H, L, St] buffer (copied out as
// stages on the way); context [B, L, H*dv]; output [B, L, out_dim].
AttentionResult run_plain(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt, Plan& plan,
                          ThreadPool& pool) {
  const int64_t B = plan.B, L = plan.L, S = plan.S, H = spec.num_heads, Hkv = spec.num_kv_heads;
  const int64_t dh = spec.head_dim, dv = spec.head_dim_v, St = S + spec.extra_keys(), group = H / Hkv;
  const float inf = std::numeric_limits<float>::infinity();
  prepare_rope(plan, spec, in);
  project_inputs(pool, plan, F32Inputs(in), 0, B);

  Tensor q(DType::F32, {B, H, L, dh}), k(DType::F32, {B, Hkv, St, dh}), v(DType::F32, {B, Hkv, St, dv});
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  split_heads(plan.q, plan.ldq, B, L, L, H, dh, static_cast<const float*>(nullptr), q.data<float>());
  split_heads(plan.k, plan.ldk, B, S, St, Hkv, dh, bias(plan.bias_k), k.data<float>());
  split_heads(plan.v, plan.ldv, B, S, St, Hkv, dv, bias(plan.bias_v), v.data<float>());

  Tensor w(DType::F32, {B, H, L, St});
  float* W = w.data<float>();
  pool.parallel_for(B * H, [&](int64_t bh, int) {
    const int64_t b = bh / H, h = bh % H;
    sgemm(true, L, St, dh, q.data<float>() + bh * L * dh, dh, k.data<float>() + (b * Hkv + h / group) * St * dh, dh,
          0.0f, W + bh * L * St, St);
  });
  AttentionResult r;
  // A stage keeps a copy; w.data() then gives w bytes of its own (copy on
  // write), so the in-place steps below do not reach into the stage.
  if (opt.collect_stages) {
    r.stages.emplace_back("scores", w);
    W = w.data<float>();
  }

  std::vector<float> tmask;
  const float* mask = in.mask ? f32_data(*in.mask, tmask) : nullptr;
  const float scale = static_cast<float>(spec.scale);
  const MaskRule rule(spec);
  pool.parallel_for(B * H, [&](int64_t bh, int) {
    const int64_t b = bh / H, h = bh % H;
    // The mask's rows: one per query, or one row every query adds (mask_ld = 0).
    const float* mrow = nullptr;
    int64_t mask_ld = 0;
    if (mask) {
      const int64_t mb = in.mask->dim(0) == 1 ? 0 : b, mh = in.mask->dim(1) == 1 ? 0 : h, ml = in.mask->dim(2);
      mrow = mask + (mb * in.mask->dim(1) + mh) * ml * St;
      mask_ld = ml == 1 ? 0 : St;
    }
    for (int64_t i = 0; i < L; ++i) {
      float* row = W + (bh * L + i) * St;
      for (int64_t j = 0; j < St; ++j) {
        float x = scale * row[j] + (mrow ? mrow[i * mask_ld + j] : 0.0f);
        if (!rule.visible(i, j)) x = -inf;
        row[j] = x;
      }
    }
  });
  if (opt.collect_stages) {
    r.stages.emplace_back("masked_scores", w);
    W = w.data<float>();
  }

  const bool drop = in.training && spec.dropout > 0.0;
  const float keep_scale = spec.dropout >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - spec.dropout));
  pool.parallel_for(B * H, [&](int64_t bh, int) {
    for (int64_t i = 0; i < L; ++i) {
      float* row = W + (bh * L + i) * St;
      float mx = -inf, sum = 0.0f;
      for (int64_t j = 0; j < St; ++j) mx = std::max(mx, row[j]);
      // A row of -inf keeps mx = -inf and exp(NaN) spreads NaN, as torch does.
      for (int64_t j = 0; j < St; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j < St; ++j) row[j] /= sum;
      if (drop)
        for (int64_t j = 0; j < St; ++j) {
          const uint64_t flat = static_cast<uint64_t>((bh * L + i) * St + j);
          row[j] = dropout_keep(in.dropout_seed, flat, spec.dropout) ? row[j] * keep_scale : 0.0f;
        }
    }
  });

  Tensor ctx(DType::F32, {B, L, H * dv});
  pool.parallel_for(B * H, [&](int64_t bh, int) {
    const int64_t b = bh / H, h = bh % H;
    sgemm(false, L, dv, St, W + bh * L * St, St, v.data<float>() + (b * Hkv + h / group) * St * dv, dv, 0.0f,
          ctx.data<float>() + b * L * H * dv + h * dv, H * dv);
  });

  if (plan.out) {
    r.output = Tensor(DType::F32, {B, L, spec.out_dim()});
    linear(pool, *plan.out, ctx.data<float>(), H * dv, B * L, r.output.data<float>(), spec.out_dim());
  } else {
    r.output = ctx;
  }
  if (opt.collect_stages) {
    r.stages.emplace_back("weights", w);
    r.stages.emplace_back("context", ctx);
    r.stages.emplace_back("output", r.output);
    // Pipeline order: q, k, v first.
    r.stages.insert(r.stages.begin(), {{"q", q}, {"k", k}, {"v", v}});
  }
  if (opt.need_weights) r.weights = std::move(w);
  return r;
}

}  // namespace mha::cpu
