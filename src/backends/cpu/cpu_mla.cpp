// The cpu backend's multi-head latent attention (cpu_mla.h): the steps of
// model/mla.h around OpenBLAS products, on the backend's pool.
#include "backends/cpu/cpu_mla.h"

#include <cblas.h>

#include <algorithm>

#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_plan.h"
#include "model/mask.h"

namespace mha::cpu {

MlaPacked pack_mla(const AttentionSpec& spec) {
  const Mla& m = *spec.mla;
  MlaPacked w;
  w.q = pack_linear(spec.q);
  if (m.q_b) w.q_b = pack_linear(*m.q_b);
  w.kv_a = pack_linear(spec.k);
  w.kv_b = pack_linear(m.kv_b);
  if (spec.out) w.out = pack_linear(*spec.out);
  w.norms = mla_norms<float>(m);
  w.kvb = m.kv_b.weight.to_f32();
  return w;
}

void mla_project(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const RopeTable& t, const float* x,
                 int64_t rows, std::vector<float>& q, std::vector<float>& ckv) {
  const Mla& m = *spec.mla;
  const int64_t H = spec.num_heads, dq = spec.head_dim, lw = m.latent_width();
  q.resize(rows * w.q.out);
  decode_project_rows(pool, w.q, x, rows, q.data());
  if (w.q_b) {
    mla_norm_query_latent(m, w.norms, q.data(), m.q_lora_rank, rows);
    std::vector<float> full(rows * H * dq);
    decode_project_rows(pool, *w.q_b, q.data(), rows, full.data());
    q.swap(full);
  }
  ckv.resize(rows * lw);
  decode_project_rows(pool, w.kv_a, x, rows, ckv.data());
  pool.parallel_for((rows + 63) / 64, [&](int64_t c, int) {
    const int64_t r0 = c * 64, n = std::min<int64_t>(64, rows - r0);
    mla_rotate_query(m, t, q.data() + r0 * H * dq, H * dq, r0, n, H);
    mla_prepare_latent(m, w.norms, t, ckv.data() + r0 * lw, lw, r0, n);
  });
}

void mla_absorb_query(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const float* q, int64_t rows,
                      float* qa) {
  const Mla& m = *spec.mla;
  const int64_t H = spec.num_heads, dq = spec.head_dim, dn = m.nope_dim, dr = m.rope_dim, kl = m.kv_lora_rank;
  const int64_t dv = spec.head_dim_v, lw = m.latent_width();
  pool.parallel_for(H, [&](int64_t h, int) {
    const float* wk = w.kvb.data() + h * (dn + dv) * kl;  // W_kb_h [dn, kl]
    float* dst = qa + h * lw;
    if (dn > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(rows), static_cast<blasint>(kl),
                  static_cast<blasint>(dn), 1.0f, q + h * dq, static_cast<blasint>(H * dq), wk, static_cast<blasint>(kl),
                  0.0f, dst, static_cast<blasint>(H * lw));
    else
      for (int64_t r = 0; r < rows; ++r) std::fill_n(dst + r * H * lw, kl, 0.0f);
    for (int64_t r = 0; r < rows; ++r) std::copy_n(q + r * H * dq + h * dq + dn, dr, dst + r * H * lw + kl);
  });
}

void mla_expand_context(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const float* cl, int64_t rows,
                        float* ctx) {
  const Mla& m = *spec.mla;
  const int64_t H = spec.num_heads, dn = m.nope_dim, kl = m.kv_lora_rank, dv = spec.head_dim_v;
  pool.parallel_for(H, [&](int64_t h, int) {
    const float* wv = w.kvb.data() + (h * (dn + dv) + dn) * kl;  // W_vb_h [dv, kl]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), static_cast<blasint>(dv),
                static_cast<blasint>(kl), 1.0f, cl + h * kl, static_cast<blasint>(H * kl), wv, static_cast<blasint>(kl),
                0.0f, ctx + h * dv, static_cast<blasint>(H * dv));
  });
}

AttentionResult run_mla(const AttentionSpec& spec, const AttentionInputs& in, const MlaPacked& w, ThreadPool& pool,
                        vec::Isa isa, bool stages) {
  const Mla& m = *spec.mla;
  const int64_t B = in.query.dim(0), L = in.query.dim(1), rows = B * L, H = spec.num_heads;
  const int64_t dq = spec.head_dim, dv = spec.head_dim_v, lw = m.latent_width();
  const F32Inputs x(in);
  const RopeTable t = rope_table(spec, in);
  std::vector<float> q, ckv;
  mla_project(pool, spec, w, t, x.query, rows, q, ckv);
  // c (the normalised latent, ckv's first kl columns) @ kv_b^T: [rows, H*(dn + dv)].
  std::vector<float> kv(rows * w.kv_b.out), K(rows * H * dq), V(rows * H * dv);
  linear(pool, w.kv_b, ckv.data(), lw, rows, kv.data(), w.kv_b.out);
  pool.parallel_for((rows + 63) / 64, [&](int64_t c, int) {
    const int64_t r0 = c * 64, n = std::min<int64_t>(64, rows - r0);
    mla_expand(m, H, dv, kv.data() + r0 * w.kv_b.out, ckv.data() + r0 * lw, lw, n, K.data() + r0 * H * dq,
               V.data() + r0 * H * dv);
  });
  FlashArgs a;
  a.B = B, a.L = L, a.S = a.St = L, a.H = a.Hkv = H, a.dh = dq, a.dv = dv;
  a.q = q.data(), a.k = K.data(), a.v = V.data(), a.ldq = a.ldk = H * dq, a.ldv = H * dv;
  a.scale = static_cast<float>(spec.scale);
  a.rule = MaskRule(spec);
  a.isa = isa;
  std::vector<float> tmask;
  if (in.mask) {
    a.mask = f32_data(*in.mask, tmask);
    a.mask_b = in.mask->dim(0), a.mask_h = in.mask->dim(1), a.mask_l = in.mask->dim(2);
  }
  std::vector<float> ctx(rows * H * dv);
  a.ctx = ctx.data(), a.ldc = H * dv;
  std::vector<FlashScratch> scratch(pool.size());
  for (FlashScratch& s : scratch) s.resize(dq, dv);
  const int64_t sets = flash_head_sets(H, H), nqb = flash_query_blocks(L);
  pool.parallel_for(B * sets * nqb, [&](int64_t i, int thread) {
    flash_block(a, i / (sets * nqb), i / nqb % sets, nqb - 1 - i % nqb, scratch[thread]);
  });
  AttentionResult r;
  r.output = Tensor(DType::F32, {B, L, spec.out_dim()});
  if (w.out)
    linear(pool, *w.out, ctx.data(), H * dv, rows, r.output.data<float>(), w.out->out);
  else
    std::copy(ctx.begin(), ctx.end(), r.output.data<float>());
  if (stages) r.stages = {{"context", Tensor::from_f32({B, L, H * dv}, std::move(ctx))}, {"output", r.output}};
  return r;
}

}  // namespace mha::cpu
