#include "backends/cpu/cpu_plan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace mha::cpu {

const float* f32_data(const Tensor& t, std::vector<float>& tmp) {
  if (t.dtype() == DType::F32) return t.data<float>();
  tmp = t.to_f32();
  return tmp.data();
}

namespace {

auto scalars(const AttentionSpec& s) {
  return std::make_tuple(s.num_heads, s.num_kv_heads, s.head_dim, s.head_dim_v, s.scale, s.causal, s.window,
                         s.add_zero_attn, s.dropout);
}

// One packed buffer against the tensors it was packed from, in order.
struct Segment {
  const Tensor* t;
  const float* packed;
};

void add_linear_segments(const PackedLinear& lin, const std::vector<const Projection*>& ps, std::vector<Segment>& out,
                         bool& shapes_ok) {
  int64_t w_off = 0, b_off = 0, rows = 0;
  bool any_bias = false;
  for (const Projection* p : ps) {
    rows += p->weight.dim(0);
    any_bias |= p->bias.has_value();
  }
  shapes_ok &= rows == lin.out && ps.front()->weight.dim(1) == lin.in && any_bias == !lin.b.empty();
  if (!shapes_ok) return;
  for (const Projection* p : ps) {
    shapes_ok &= p->weight.dim(1) == lin.in;
    out.push_back({&p->weight, lin.w.data() + w_off});
    w_off += p->weight.numel();
    if (p->bias) out.push_back({&*p->bias, lin.b.data() + b_off});
    b_off += p->weight.dim(0);
  }
}

}  // namespace

bool plan_matches(ThreadPool& pool, const Plan& plan, const AttentionSpec& spec) {
  if (plan.spec_scalars != scalars(spec)) return false;
  if (spec.bias_k.has_value() == plan.bias_k.empty() || spec.bias_v.has_value() == plan.bias_v.empty()) return false;
  if (spec.out.has_value() != (plan.out != nullptr)) return false;
  bool shapes_ok = true;
  std::vector<Segment> segs;
  if (plan.fused) {
    add_linear_segments(plan.qkv, {&spec.q, &spec.k, &spec.v}, segs, shapes_ok);
  } else {
    add_linear_segments(plan.q, {&spec.q}, segs, shapes_ok);
    add_linear_segments(plan.k, {&spec.k}, segs, shapes_ok);
    add_linear_segments(plan.v, {&spec.v}, segs, shapes_ok);
  }
  if (spec.out) add_linear_segments(*plan.out, {&*spec.out}, segs, shapes_ok);
  if (spec.bias_k) {
    shapes_ok &= spec.bias_k->numel() == static_cast<int64_t>(plan.bias_k.size());
    segs.push_back({&*spec.bias_k, plan.bias_k.data()});
  }
  if (spec.bias_v) {
    shapes_ok &= spec.bias_v->numel() == static_cast<int64_t>(plan.bias_v.size());
    segs.push_back({&*spec.bias_v, plan.bias_v.data()});
  }
  if (!shapes_ok) return false;
  for (const Segment& s : segs)
    if (s.t->dtype() != DType::F32) return false;  // rare: rebuild rather than convert to compare
  // Comparing megabytes of weights costs about a millisecond split over the pool.
  constexpr int64_t kChunk = 1 << 18;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (segment, first element)
  for (size_t i = 0; i < segs.size(); ++i)
    for (int64_t e = 0; e < segs[i].t->numel(); e += kChunk) chunks.emplace_back(i, e);
  std::atomic<bool> same{true};
  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t c, int) {
    const Segment& s = segs[chunks[c].first];
    const int64_t e = chunks[c].second, n = std::min(kChunk, s.t->numel() - e);
    if (std::memcmp(s.t->data<float>() + e, s.packed + e, sizeof(float) * n) != 0) same = false;
  });
  return same;
}

std::unique_ptr<Plan> build_plan(const AttentionSpec& spec, const AttentionInputs& in, bool fused, bool flash,
                                 int threads) {
  auto plan = std::make_unique<Plan>();
  plan->spec_scalars = scalars(spec);
  plan->fused = fused;
  plan->B = in.query.dim(0);
  plan->L = in.query.dim(1);
  plan->S = in.key.dim(1);
  plan->eq = spec.q.weight.dim(0);
  plan->ek = spec.k.weight.dim(0);
  plan->ev = spec.v.weight.dim(0);
  if (fused) {
    plan->qkv = pack_stacked({&spec.q, &spec.k, &spec.v});
  } else {
    plan->q = pack_linear(spec.q);
    plan->k = pack_linear(spec.k);
    plan->v = pack_linear(spec.v);
  }
  if (spec.out) plan->out = std::make_unique<PackedLinear>(pack_linear(*spec.out));
  if (spec.bias_k) plan->bias_k = spec.bias_k->to_f32();
  if (spec.bias_v) plan->bias_v = spec.bias_v->to_f32();

  const int64_t B = plan->B, L = plan->L, S = plan->S;
  plan->proj.assign(fused ? B * L * (plan->eq + plan->ek + plan->ev) : B * L * plan->eq + B * S * (plan->ek + plan->ev),
                    0.0f);
  // With an output projection the context is a temporary; when it has q's
  // shape it can overwrite q (each flash task reads its q rows before it
  // writes the same ctx rows), which saves B*L*H*dv floats at long lengths.
  const int64_t ectx = spec.num_heads * spec.head_dim_v;
  plan->ctx_in_place = flash && spec.out && spec.head_dim_v == spec.head_dim;
  if (spec.out && !plan->ctx_in_place) plan->ctx.assign(B * L * ectx, 0.0f);
  if (flash) {
    plan->scratch.resize(threads);
    for (auto& s : plan->scratch) s.resize(spec.head_dim, spec.head_dim_v);
  }
  return plan;
}

void project_qkv(ThreadPool& pool, Plan& plan, const AttentionInputs& in) {
  const int64_t BL = plan.B * plan.L, BS = plan.B * plan.S;
  std::vector<float> tq, tk, tv;
  const float* xq = f32_data(in.query, tq);
  if (plan.fused) {
    linear(pool, plan.qkv, xq, plan.qkv.in, BL, plan.proj.data(), plan.ldq());
    return;
  }
  const float* xk = f32_data(in.key, tk);
  const float* xv = f32_data(in.value, tv);
  linear(pool, plan.q, xq, plan.q.in, BL, plan.q_ptr(), plan.ldq());
  linear(pool, plan.k, xk, plan.k.in, BS, plan.k_ptr(), plan.ldk());
  linear(pool, plan.v, xv, plan.v.in, BS, plan.v_ptr(), plan.ldv());
}

}  // namespace mha::cpu
