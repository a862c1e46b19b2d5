#include "backends/cpu/cpu_flash_run.h"

#include <algorithm>

namespace mha::cpu {

namespace {

// Runs query blocks [qb0, qb1) of batches [b0, b1) for every head set. Under a
// causal mask the last query blocks carry the most keys: they are handed out
// first so the dynamic schedule ends on small tasks.
void run_blocks(ThreadPool& pool, const FlashArgs& a, Plan& plan, int64_t b0, int64_t b1, int64_t qb0, int64_t qb1) {
  const int64_t nq = qb1 - qb0, sets = flash_head_sets(a.H, a.Hkv);
  pool.parallel_for((b1 - b0) * sets * nq, [&](int64_t t, int thread) {
    const int64_t qb = qb1 - 1 - t % nq, bs = t / nq;
    flash_block(a, b0 + bs / sets, bs % sets, qb, plan.scratch[thread]);
  });
}

}  // namespace

// Shapes: query [B, L, q_in] -> q rows [G*L, H*dh] for a group of G batches
// at a time (or plan.q_chunk_rows rows of one batch for kChunked); k, v
// [G*S, Hkv*d] (all B*S rows for kChunked); context [rows, H*dv] (into q's
// storage, a plan buffer, or the output itself when no output projection
// follows); output [B, L, out_dim].
AttentionResult run_flash(const AttentionSpec& spec, const AttentionInputs& in, Plan& plan, ThreadPool& pool,
                          vec::Isa isa) {
  const int64_t B = plan.B, L = plan.L, S = plan.S, H = spec.num_heads, dv = spec.head_dim_v, E_out = spec.out_dim();
  AttentionResult r;
  r.output = Tensor(DType::F32, {B, L, E_out});
  float* out = r.output.data<float>();
  const F32Inputs x(in);
  prepare_rope(plan, spec, in);

  FlashArgs a;
  a.B = B, a.L = L, a.S = S, a.St = S + spec.extra_keys();
  a.H = H, a.Hkv = spec.num_kv_heads, a.dh = spec.head_dim, a.dv = dv;
  a.q = plan.q, a.k = plan.k, a.v = plan.v;
  a.ldq = plan.ldq, a.ldk = plan.ldk, a.ldv = plan.ldv;
  a.bias_k = plan.bias_k.empty() ? nullptr : plan.bias_k.data();
  a.bias_v = plan.bias_v.empty() ? nullptr : plan.bias_v.data();
  a.scale = static_cast<float>(spec.scale);
  a.rule = MaskRule(spec);
  a.isa = isa;
  std::vector<float> tmask;
  if (in.mask) {
    a.mask = f32_data(*in.mask, tmask);
    a.mask_b = in.mask->dim(0), a.mask_h = in.mask->dim(1), a.mask_l = in.mask->dim(2);
  }
  a.dropout = in.training && spec.dropout > 0.0;
  a.dropout_p = spec.dropout, a.dropout_seed = in.dropout_seed;

  // Where the context of rows starting at flattened row r0 goes.
  auto set_ctx = [&](int64_t r0) {
    a.q_row0 = r0;
    if (!plan.out)
      a.ctx = out + r0 * E_out, a.ldc = E_out;
    else if (plan.ctx.empty())
      a.ctx = plan.q, a.ldc = plan.ldq;
    else
      a.ctx = plan.ctx.data(), a.ldc = H * dv;
  };
  const int64_t nqb = flash_query_blocks(L);
  if (plan.layout != Layout::kChunked) {
    for (int64_t b0 = 0; b0 < B; b0 += plan.group_batches) {
      const int64_t b1 = std::min(B, b0 + plan.group_batches);
      project_inputs(pool, plan, x, b0, b1);
      a.kv_row0 = b0 * S;
      set_ctx(b0 * L);
      run_blocks(pool, a, plan, b0, b1, 0, nqb);
      if (plan.out) linear(pool, *plan.out, a.ctx, a.ldc, (b1 - b0) * L, out + b0 * L * E_out, E_out);
    }
    return r;
  }
  project_inputs(pool, plan, x, 0, B);
  const int64_t chunk_blocks = std::max<int64_t>(1, plan.q_chunk_rows / kBr);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c0 = 0; c0 < nqb; c0 += chunk_blocks) {
      const int64_t c1 = std::min(nqb, c0 + chunk_blocks);
      const int64_t r0 = b * L + c0 * kBr, n = std::min(L, c1 * kBr) - c0 * kBr;
      project_query_rows(pool, plan, x.query, r0, n);
      set_ctx(r0);
      run_blocks(pool, a, plan, b, b + 1, c0, c1);
      if (plan.out) linear(pool, *plan.out, a.ctx, a.ldc, n, out + r0 * E_out, E_out);
    }
  return r;
}

}  // namespace mha::cpu
