// The reference backend's multi-head latent attention, in float64 loops:
// run() takes the expanded form's q, k, v from mla_qkv; a decode session
// keeps the latent cache ([c | kr] per token, rounded through the cache
// format as the cpu session's rows are) and attends in the absorbed form:
//   qa_h = [q_nope_h @ W_kb_h | q_rope_h]            [kv_lora_rank + dr]
//   s_j  = scale * qa_h . [c_j | kr_j]               (= q_h . key_h,j)
//   out_h = W_vb_h @ (sum_j softmax(s)_j c_j)        (= sum_j p_j v_h,j)
#include "backends/reference/reference_mla.h"

#include <algorithm>

#include "backends/cpu/kv_format.h"
#include "model/mask.h"
#include "model/mla.h"

namespace mha::reference {

void mla_qkv(const AttentionSpec& spec, const RopeTable& t, const Vec& xq, const Vec& xk, int64_t rows, Vec& q, Vec& k,
             Vec& v) {
  const Mla& m = *spec.mla;
  const MlaNorms<double> w = mla_norms<double>(m);
  const int64_t H = spec.num_heads, dh = spec.head_dim, dv = spec.head_dim_v, lw = m.latent_width();
  q = project(xq, rows, spec.q);
  if (m.q_b) {
    mla_norm_query_latent(m, w, q.data(), m.q_lora_rank, rows);
    q = project(q, rows, *m.q_b);
  }
  mla_rotate_query(m, t, q.data(), H * dh, 0, rows, H);
  Vec ckv = project(xk, rows, spec.k);
  mla_prepare_latent(m, w, t, ckv.data(), lw, 0, rows);
  Vec c(rows * m.kv_lora_rank);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(ckv.data() + r * lw, m.kv_lora_rank, c.data() + r * m.kv_lora_rank);
  const Vec kv = project(c, rows, m.kv_b);
  k.resize(rows * H * dh);
  v.resize(rows * H * dv);
  mla_expand(m, H, dv, kv.data(), ckv.data(), lw, rows, k.data(), v.data());
}

namespace {

class MlaDecode : public DecodeSession {
 public:
  MlaDecode(const AttentionSpec& spec, const DecodeOptions& opt)
      : spec_(spec), opt_(opt), m_(*spec_.mla), rule_(spec), norms_(mla_norms<double>(m_)),
        kvb_(m_.kv_b.weight.to_f64()), lat_(opt.batch * opt.max_tokens * m_.latent_width()) {}

  int64_t length() const override { return len_; }
  int64_t cache_bytes() const override { return opt_.batch * len_ * m_.latent_width() * int64_t{sizeof(double)}; }

  void fill_synthetic(int64_t n, uint64_t seed) override {
    check_fill(opt_, len_, n);
    const int64_t T = opt_.max_tokens, lw = m_.latent_width();
    for (int64_t b = 0; b < opt_.batch; ++b)
      for (int64_t j = len_; j < len_ + n; ++j) {
        double* row = lat_.data() + (b * T + j) * lw;
        // The cpu session's stream for its one key head's rows (the keys' even elements).
        for (int64_t d = 0; d < lw; ++d) row[d] = synthetic_value(seed, 2 * static_cast<uint64_t>((b * T + j) * lw + d));
        round_row(row);
      }
    len_ += n;
  }

  Tensor append(const Tensor& x) override {
    check_append(spec_, opt_, len_, x);
    const int64_t B = opt_.batch, n = x.dim(1), T = opt_.max_tokens, H = spec_.num_heads;
    const int64_t dq = spec_.head_dim, dv = spec_.head_dim_v, lw = m_.latent_width();
    const Vec xs = x.to_f64();
    const RopeTable t = rope_table_at(spec_, len_, n);
    Vec q = project(xs, B * n, spec_.q);
    if (m_.q_b) {
      mla_norm_query_latent(m_, norms_, q.data(), m_.q_lora_rank, B * n);
      q = project(q, B * n, *m_.q_b);
    }
    mla_rotate_query(m_, t, q.data(), H * dq, 0, B * n, H);
    Vec ckv = project(xs, B * n, spec_.k);
    mla_prepare_latent(m_, norms_, t, ckv.data(), lw, 0, B * n);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < n; ++r) {
        double* row = lat_.data() + (b * T + len_ + r) * lw;
        std::copy_n(ckv.data() + (b * n + r) * lw, lw, row);
        round_row(row);
      }
    Vec ctx(B * n * H * dv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t h = 0; h < H; ++h)
          attend(b, len_ + r, q.data() + ((b * n + r) * H + h) * dq, h, ctx.data() + ((b * n + r) * H + h) * dv);
    len_ += n;
    const Vec out = spec_.out ? project(ctx, B * n, *spec_.out) : ctx;
    return Tensor::from_f64({B, n, spec_.out_dim()}, out);
  }

 private:
  // Head h of the query at position p of batch row b (q_h: [q_nope | q_rope])
  // against the cached latent rows it sees, into ctx [dv].
  void attend(int64_t b, int64_t p, const double* qh, int64_t h, double* ctx) {
    const int64_t kl = m_.kv_lora_rank, dn = m_.nope_dim, dv = spec_.head_dim_v, lw = m_.latent_width();
    const double* wk = kvb_.data() + h * (dn + dv) * kl;  // W_kb_h [dn, kl], then W_vb_h [dv, kl]
    const double* wv = wk + dn * kl;
    qa_.assign(lw, 0.0);
    for (int64_t d = 0; d < dn; ++d)
      for (int64_t c = 0; c < kl; ++c) qa_[c] += qh[d] * wk[d * kl + c];
    std::copy_n(qh + dn, m_.rope_dim, qa_.data() + kl);
    const int64_t j0 = rule_.first_key(p), j1 = p + 1;
    const double* rows = lat_.data() + b * opt_.max_tokens * lw;
    w_.assign(j1 - j0, 0.0);
    for (int64_t j = j0; j < j1; ++j) {
      double s = 0.0;
      for (int64_t d = 0; d < lw; ++d) s += qa_[d] * rows[j * lw + d];
      w_[j - j0] = spec_.scale * s;
    }
    softmax_row(spec_, {}, h, w_.data(), j1 - j0);
    cl_.assign(kl, 0.0);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t c = 0; c < kl; ++c) cl_[c] += w_[j - j0] * rows[j * lw + c];
    for (int64_t e = 0; e < dv; ++e) {
      double acc = 0.0;
      for (int64_t c = 0; c < kl; ++c) acc += wv[e * kl + c] * cl_[c];
      ctx[e] = acc;
    }
  }

  // A latent row as the cache holds it: float32 keeps the float64 values
  // (as the reference's K/V cache does); any other format rounds it to
  // float32 and through the format (backends/cpu/kv_format.h).
  void round_row(double* x) const {
    if (opt_.cache_dtype == CacheDtype::Float32) return;
    std::vector<float> f(x, x + m_.latent_width());
    kv_round_row(opt_.cache_dtype, f.data(), m_.latent_width());
    std::copy(f.begin(), f.end(), x);
  }

  AttentionSpec spec_;  // Tensors share their bytes: a cheap copy
  DecodeOptions opt_;
  const Mla& m_;
  MaskRule rule_;
  MlaNorms<double> norms_;
  Vec kvb_;  // kv_b [H*(dn + dv), kv_lora_rank]
  Vec lat_;  // [B, max_tokens, kv_lora_rank + dr]
  int64_t len_ = 0;
  Vec qa_, w_, cl_;
};

}  // namespace

std::unique_ptr<DecodeSession> make_mla_decode(const AttentionSpec& spec, const DecodeOptions& opt) {
  return std::make_unique<MlaDecode>(spec, opt);
}

}  // namespace mha::reference
