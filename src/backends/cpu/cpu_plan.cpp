#include "backends/cpu/cpu_plan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/cpu_gemm.h"
#include "util/huge_pages.h"

namespace mha::cpu {

const float* f32_data(const Tensor& t, std::vector<float>& tmp) {
  if (t.dtype() == DType::F32) return t.data<float>();
  tmp = t.to_f32();
  return tmp.data();
}

// Self-attention passes one tensor three times (copies sharing bytes):
// a non-float32 one is converted once, not three times.
F32Inputs::F32Inputs(const AttentionInputs& in)
    : query(f32_data(in.query, tq)),
      key(in.key.raw() == in.query.raw() ? query : f32_data(in.key, tk)),
      value(in.value.raw() == in.key.raw() ? key : f32_data(in.value, tv)) {}

namespace {

auto scalars(const AttentionSpec& s) {
  return std::make_tuple(s.num_heads, s.num_kv_heads, s.head_dim, s.head_dim_v, s.scale, s.causal, s.window,
                         s.add_zero_attn, s.dropout, s.rope.has_value(), s.rope ? s.rope->theta : 0.0);
}

// A run of packed floats against the tensor elements it was packed from.
struct Segment {
  const Tensor* t;
  int64_t offset, n;  // elements [offset, offset + n) of t
  const float* packed;
};

// In pack_stacked's order: group by group when grouped (cpu_projection.h).
void add_linear_segments(const PackedLinear& lin, const std::vector<const Projection*>& ps, std::vector<Segment>& out,
                         bool& shapes_ok) {
  bool any_bias = false;
  shapes_ok &= ps.size() == lin.rows.size() && (lin.block.empty() || lin.block.size() == ps.size());
  if (!shapes_ok) return;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    shapes_ok &= ps[i]->weight.dim(0) == lin.rows[i] && ps[i]->weight.dim(1) == lin.in;
    any_bias |= ps[i]->bias.has_value();
  }
  shapes_ok &= any_bias == !lin.b.empty();
  if (!shapes_ok) return;
  int64_t w_off = 0, b_off = 0;
  for (int64_t g = 0; g < lin.groups(); ++g)
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const Projection* p = ps[i];
      const int64_t n = lin.block.empty() ? lin.rows[i] : lin.block[i];
      out.push_back({&p->weight, g * n * lin.in, n * lin.in, lin.w.data() + w_off});
      w_off += n * lin.in;
      if (p->bias) out.push_back({&*p->bias, g * n, n, lin.b.data() + b_off});
      b_off += n;
    }
}

}  // namespace

ChunkPolicy& chunk_policy() {
  static ChunkPolicy policy;
  return policy;
}

int64_t projection_group_batches(int64_t B, int64_t L) {
  return std::min(B, std::max<int64_t>(1, (chunk_policy().group_rows + L - 1) / std::max<int64_t>(L, 1)));
}

void project_rows(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t B, int64_t L, float* y) {
  const int64_t g = projection_group_batches(B, L);
  for (int64_t b0 = 0; b0 < B; b0 += g)
    linear(pool, lin, x + b0 * L * lin.in, lin.in, (std::min(B, b0 + g) - b0) * L, y + b0 * L * lin.out, lin.out);
}

bool plan_matches(ThreadPool& pool, const Plan& plan, const AttentionSpec& spec) {
  if (plan.spec_scalars != scalars(spec)) return false;
  if (spec.bias_k.has_value() == plan.bias_k.empty() || spec.bias_v.has_value() == plan.bias_v.empty()) return false;
  if (spec.out.has_value() != (plan.out != nullptr)) return false;
  bool shapes_ok = true;
  std::vector<Segment> segs;
  if (plan.layout == Layout::kFusedQKV) {
    add_linear_segments(plan.lin[0], {&spec.q, &spec.k, &spec.v}, segs, shapes_ok);
  } else {
    add_linear_segments(plan.lin[0], {&spec.q}, segs, shapes_ok);
    if (plan.kv_fused) {
      add_linear_segments(plan.lin[1], {&spec.k, &spec.v}, segs, shapes_ok);
    } else {
      add_linear_segments(plan.lin[1], {&spec.k}, segs, shapes_ok);
      add_linear_segments(plan.lin[2], {&spec.v}, segs, shapes_ok);
    }
  }
  if (spec.out) add_linear_segments(*plan.out, {&*spec.out}, segs, shapes_ok);
  if (spec.bias_k) {
    shapes_ok &= spec.bias_k->numel() == static_cast<int64_t>(plan.bias_k.size());
    segs.push_back({&*spec.bias_k, 0, spec.bias_k->numel(), plan.bias_k.data()});
  }
  if (spec.bias_v) {
    shapes_ok &= spec.bias_v->numel() == static_cast<int64_t>(plan.bias_v.size());
    segs.push_back({&*spec.bias_v, 0, spec.bias_v->numel(), plan.bias_v.data()});
  }
  if (!shapes_ok) return false;
  for (const Segment& s : segs)
    if (s.t->dtype() != DType::F32) return false;  // rare: rebuild rather than convert to compare
  // Comparing megabytes of weights costs about a millisecond split over the pool.
  constexpr int64_t kChunk = 1 << 18;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (segment, first element)
  for (size_t i = 0; i < segs.size(); ++i)
    for (int64_t e = 0; e < segs[i].n; e += kChunk) chunks.emplace_back(i, e);
  std::atomic<bool> same{true};
  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t c, int) {
    const Segment& s = segs[chunks[c].first];
    const int64_t e = chunks[c].second, n = std::min(kChunk, s.n - e);
    if (std::memcmp(s.t->data<float>() + s.offset + e, s.packed + e, sizeof(float) * n) != 0) same = false;
  });
  return same;
}

std::unique_ptr<Plan> build_plan(const AttentionSpec& spec, const AttentionInputs& in, const PlanKey& key,
                                 int threads) {
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  p.spec_scalars = scalars(spec);
  p.B = in.query.dim(0), p.L = in.query.dim(1), p.S = in.key.dim(1);
  const int64_t B = p.B, L = p.L, S = p.S;
  const int64_t eq = spec.q.weight.dim(0), ek = spec.k.weight.dim(0), ev = spec.v.weight.dim(0);
  const bool flash = !key.need_weights && !key.collect_stages && !needs_plain(spec);
  const bool same_in = spec.q_in() == spec.k_in() && spec.q_in() == spec.v_in();
  const ChunkPolicy& policy = chunk_policy();
  p.group_batches = flash ? projection_group_batches(B, L) : B;
  p.proj_group_batches = p.group_batches;
  // Only with one batch per group: a group of short sequences holds fewer
  // q rows than one chunk, and the layout must not depend on the q width
  // (a head-parallel rank projects a share of it) lest the row calls differ.
  if (flash && p.group_batches == 1 && L * eq > policy.above_floats)
    p.layout = Layout::kChunked, p.group_batches = B;
  else if (key.qkv_same && same_in)
    p.layout = Layout::kFusedQKV;
  else
    p.layout = Layout::kSeparate;
  p.kv_fused = p.layout != Layout::kFusedQKV && key.kv_same && spec.k_in() == spec.v_in();

  // Asked for (RunOptions::group_projections): one sgemm per key/value
  // group, [Wq_g; Wk_g; Wv_g] (cpu_projection.h), the calls a head-parallel
  // rank holding that group makes too. Otherwise one call over all heads.
  const bool grouped = key.group_projections;
  auto blocks = [&](std::vector<int64_t> b) { return grouped ? b : std::vector<int64_t>{}; };
  const int64_t bq = spec.num_heads / spec.num_kv_heads * spec.head_dim, bk = spec.head_dim, bv = spec.head_dim_v;
  if (p.layout == Layout::kFusedQKV) {
    p.lin.push_back(pack_stacked({&spec.q, &spec.k, &spec.v}, blocks({bq, bk, bv})));
  } else {
    p.lin.push_back(pack_stacked({&spec.q}, blocks({bq})));
    if (p.kv_fused) {
      p.lin.push_back(pack_stacked({&spec.k, &spec.v}, blocks({bk, bv})));
    } else {
      p.lin.push_back(pack_stacked({&spec.k}, blocks({bk})));
      p.lin.push_back(pack_stacked({&spec.v}, blocks({bv})));
    }
  }
  if (spec.out) p.out = std::make_unique<PackedLinear>(pack_linear(*spec.out));
  if (spec.bias_k) p.bias_k = spec.bias_k->to_f32();
  if (spec.bias_v) p.bias_v = spec.bias_v->to_f32();

  p.rope = spec.rope.has_value();
  p.qk_norm = qk_norm_weights<float>(spec);
  p.heads = spec.num_heads, p.kv_heads = spec.num_kv_heads, p.head_dim = spec.head_dim;
  // Whole row blocks, so that a chunk's calls are the ones a whole batch's
  // projection makes (cpu_gemm.h, kRowBlock).
  p.q_chunk_rows = (policy.rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  const int64_t G = p.group_batches;
  const int64_t q_rows = p.layout == Layout::kChunked ? std::min(B * L, p.q_chunk_rows) : G * L;
  // Left uninitialised: the GEMMs write every element before anything reads it.
  const int64_t proj_floats = p.layout == Layout::kFusedQKV ? G * L * (eq + ek + ev) : q_rows * eq + G * S * (ek + ev);
  p.proj.reset(new float[proj_floats]);
  advise_huge_pages(p.proj.get(), sizeof(float) * proj_floats);
  float* base = p.proj.get();
  if (p.layout == Layout::kFusedQKV) {
    p.q = base, p.k = base + eq, p.v = base + eq + ek;
    p.ldq = p.ldk = p.ldv = eq + ek + ev;
  } else {
    p.q = base, p.ldq = eq;
    p.k = base + q_rows * eq;
    if (p.kv_fused)
      p.v = p.k + ek, p.ldk = p.ldv = ek + ev;
    else
      p.v = p.k + G * S * ek, p.ldk = ek, p.ldv = ev;
  }
  // With an output projection the context is a temporary; when it has q's
  // shape it overwrites q (each flash task reads its q rows before it
  // writes the same ctx rows), which saves rows*H*dv floats.
  const bool ctx_in_q = flash && spec.head_dim_v == spec.head_dim;
  if (flash && spec.out && !ctx_in_q) p.ctx.resize(q_rows * spec.num_heads * spec.head_dim_v);
  if (flash) {
    p.scratch.resize(threads);
    for (auto& s : p.scratch) s.resize(spec.head_dim, spec.head_dim_v);
  }
  return plan;
}

bool needs_plain(const AttentionSpec& spec) { return spec.softcap > 0.0 || spec.sinks.has_value(); }

void prepare_rope(Plan& plan, const AttentionSpec& spec, const AttentionInputs& in) {
  if (!plan.rope || (plan.rope_default_positions && !in.positions)) return;
  plan.rope_table = rope_table(spec, in);
  plan.rope_default_positions = !in.positions;
}

namespace {

// QK-normalises (with the key's or the query's weights) and rotates rows
// [row0, row0 + n) (flattened b*L + i) held from x's first row on, 32 rows
// per task.
void rotate(ThreadPool& pool, const Plan& plan, bool key, float* x, int64_t ld, int64_t row0, int64_t n,
            int64_t heads) {
  constexpr int64_t kRows = 32;
  pool.parallel_for((n + kRows - 1) / kRows, [&](int64_t t, int) {
    const int64_t r = t * kRows, m = std::min(kRows, n - r);
    if (plan.qk_norm)
      apply_qk_norm_rows(key ? plan.qk_norm->k : plan.qk_norm->q, plan.qk_norm->eps, x + r * ld, ld, m, heads,
                         plan.head_dim);
    if (plan.rope) apply_rope_rows(plan.rope_table, x + r * ld, ld, row0 + r, m, heads);
  });
}

}  // namespace

void project_inputs(ThreadPool& pool, Plan& plan, const F32Inputs& x, int64_t b0, int64_t b1) {
  const int64_t L = plan.L, S = plan.S, nq = (b1 - b0) * L, nkv = (b1 - b0) * S;
  const PackedLinear& lq = plan.lin[0];
  if (plan.layout == Layout::kFusedQKV) {
    linear(pool, lq, x.key + b0 * S * lq.in, lq.in, nq, plan.q, plan.ldq);
  } else {
    if (plan.layout == Layout::kSeparate) linear(pool, lq, x.query + b0 * L * lq.in, lq.in, nq, plan.q, plan.ldq);
    // kChunked projects every batch's keys and values here, in the same
    // groups as the other layouts (row calls as in project_rows).
    const PackedLinear& lk = plan.lin[1];
    for (int64_t g0 = b0; g0 < b1; g0 += plan.proj_group_batches) {
      const int64_t n = (std::min(b1, g0 + plan.proj_group_batches) - g0) * S, r = (g0 - b0) * S;
      linear(pool, lk, x.key + g0 * S * lk.in, lk.in, n, plan.k + r * plan.ldk, plan.ldk);
      if (plan.kv_fused) continue;
      const PackedLinear& lv = plan.lin[2];
      linear(pool, lv, x.value + g0 * S * lv.in, lv.in, n, plan.v + r * plan.ldv, plan.ldv);
    }
  }
  if (!plan.rope && !plan.qk_norm) return;
  // A rope needs S == L (validate_inputs), so key rows index positions as query rows do.
  if (plan.layout != Layout::kChunked) rotate(pool, plan, false, plan.q, plan.ldq, b0 * L, nq, plan.heads);
  rotate(pool, plan, true, plan.k, plan.ldk, b0 * S, nkv, plan.kv_heads);
}

void project_query_rows(ThreadPool& pool, Plan& plan, const float* xq, int64_t r0, int64_t n) {
  linear(pool, plan.lin[0], xq + r0 * plan.lin[0].in, plan.lin[0].in, n, plan.q, plan.ldq);
  if (plan.rope || plan.qk_norm) rotate(pool, plan, false, plan.q, plan.ldq, r0, n, plan.heads);
}

}  // namespace mha::cpu
