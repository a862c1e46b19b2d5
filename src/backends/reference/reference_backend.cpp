#include "backends/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/dropout.h"
#include "model/heads.h"
#include "model/mask.h"
#include "model/qk_norm.h"
#include "model/rope.h"
#include "backends/cpu/kv_format.h"
#include "backends/reference/reference_mla.h"

namespace mha {

namespace reference {

// y[n, out] = x[n, in] @ w[out, in]^T + b[out], all in double. Each element
// is one sum over i in order, from 0.0, then the bias. Four rows by four
// outputs at a time: sixteen such sums side by side run at the FPU's
// throughput, not at one sum's latency, and each keeps its bits (the test
// suites run this backend at seed 002's full shape). A partial block
// repeats its last row or output and drops the copies.
Vec project(const Vec& x, int64_t n, const Projection& p) {
  const int64_t out = p.weight.dim(0), in = p.weight.dim(1);
  const Vec w = p.weight.to_f64(), b = p.bias ? p.bias->to_f64() : Vec(out, 0.0);
  Vec y(n * out);
  constexpr int64_t kR = 4, kO = 4;
  for (int64_t r0 = 0; r0 < n; r0 += kR)
    for (int64_t o0 = 0; o0 < out; o0 += kO) {
      const int64_t nr = std::min(kR, n - r0), no = std::min(kO, out - o0);
      const double *xr[kR], *wo[kO];
      for (int64_t a = 0; a < kR; ++a) xr[a] = x.data() + (r0 + std::min(a, nr - 1)) * in;
      for (int64_t c = 0; c < kO; ++c) wo[c] = w.data() + (o0 + std::min(c, no - 1)) * in;
      double acc[kR][kO] = {};
      for (int64_t i = 0; i < in; ++i)
        for (int64_t a = 0; a < kR; ++a)
          for (int64_t c = 0; c < kO; ++c) acc[a][c] += xr[a][i] * wo[c][i];
      for (int64_t a = 0; a < nr; ++a)
        for (int64_t c = 0; c < no; ++c) y[(r0 + a) * out + o0 + c] = acc[a][c] + b[o0 + c];
    }
  return y;
}

namespace {

// s[j] = q . k_j over n rows of k (each a sum over d in order, from 0.0),
// four rows side by side for the reason project() gives.
void dot_rows(const double* q, const double* k, int64_t n, int64_t dh, double* s) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const double *k0 = k + j * dh, *k1 = k0 + dh, *k2 = k1 + dh, *k3 = k2 + dh;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    for (int64_t d = 0; d < dh; ++d) {
      a0 += q[d] * k0[d], a1 += q[d] * k1[d];
      a2 += q[d] * k2[d], a3 += q[d] * k3[d];
    }
    s[j] = a0, s[j + 1] = a1, s[j + 2] = a2, s[j + 3] = a3;
  }
  for (; j < n; ++j) {
    double a = 0.0;
    for (int64_t d = 0; d < dh; ++d) a += q[d] * k[j * dh + d];
    s[j] = a;
  }
}

// out[d] = sum over j in order of w[j] * v[j, d], from 0.0: a row of v at a
// time, so the dv sums run side by side, each in its own order over j.
void weighted_rows(const double* w, int64_t n, const double* v, int64_t dv, double* out) {
  std::fill(out, out + dv, 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < dv; ++d) out[d] += w[j] * v[j * dv + d];
}

}  // namespace

}  // namespace reference

namespace {

using reference::dot_rows;
using reference::project;
using reference::Vec;
using reference::weighted_rows;

// What happens to q and k between the projection and the scores: the QK
// norm, then the rotary embedding (model/qk_norm.h, model/rope.h).
void prepare_qk(const AttentionSpec& spec, const RopeTable* rope, Vec& q, int64_t q_rows, Vec& k, int64_t k_rows) {
  const int64_t H = spec.num_heads, Hkv = spec.num_kv_heads, dh = spec.head_dim;
  if (const auto norm = qk_norm_weights<double>(spec)) {
    apply_qk_norm_rows(norm->q, norm->eps, q.data(), H * dh, q_rows, H, dh);
    apply_qk_norm_rows(norm->k, norm->eps, k.data(), Hkv * dh, k_rows, Hkv, dh);
  }
  if (rope) {
    apply_rope_rows(*rope, q.data(), H * dh, 0, q_rows, H);
    apply_rope_rows(*rope, k.data(), Hkv * dh, 0, k_rows, Hkv);
  }
}

// A scaled score through the spec's logit softcap (Gemma 2), when it has one.
double softcapped(const AttentionSpec& spec, double x) {
  return spec.softcap > 0.0 ? spec.softcap * std::tanh(x / spec.softcap) : x;
}

}  // namespace

// Softmax of row w in place, with head h's sink (gpt-oss) joining the
// denominator when the spec has sinks. A row of -inf without a sink keeps
// mx = -inf, so exp(NaN) spreads NaN as torch does.
void reference::softmax_row(const AttentionSpec& spec, const std::vector<double>& sinks, int64_t h, double* w, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, w[j]);
  double sum = 0.0;
  if (spec.sinks) {
    mx = std::max(mx, sinks[h]);
    sum = std::exp(sinks[h] - mx);
  }
  for (int64_t j = 0; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
  for (int64_t j = 0; j < n; ++j) w[j] /= sum;
}

namespace {

using reference::softmax_row;

// The float64 KV cache: K and V [B, Hkv, max_tokens, d] as doubles. A
// float32 cache keeps the float64 values (the reference never computes
// below float64), so that prefill + steps equal one causal run() over the
// same tokens bit for bit: each row is projected and rotated by the same
// code, and the attention of a row over its visible keys is run()'s loop
// without the masked keys, whose weights are exact zeros there. Any other
// cache_dtype rounds each row to float32 and then through the format
// (backends/cpu/kv_format.h, the cpu session's bits) when appended, as a
// float32 model's `k.to(torch.bfloat16)` does; attention then runs in
// float64 on the decoded values.
class ReferenceDecode : public DecodeSession {
 public:
  ReferenceDecode(const AttentionSpec& spec, const DecodeOptions& opt)
      : spec_(spec), opt_(opt), rule_(spec),
        K_(opt.batch * spec.num_kv_heads * opt.max_tokens * spec.head_dim),
        V_(opt.batch * spec.num_kv_heads * opt.max_tokens * spec.head_dim_v) {}

  int64_t length() const override { return len_; }
  int64_t cache_bytes() const override {
    return opt_.batch * spec_.num_kv_heads * len_ * (spec_.head_dim + spec_.head_dim_v) * int64_t{sizeof(double)};
  }

  void fill_synthetic(int64_t n, uint64_t seed) override {
    check_fill(opt_, len_, n);
    const int64_t T = opt_.max_tokens, dh = spec_.head_dim, dv = spec_.head_dim_v;
    for (int64_t bg = 0; bg < opt_.batch * spec_.num_kv_heads; ++bg)
      for (int64_t j = len_; j < len_ + n; ++j) {
        for (int64_t d = 0; d < dh; ++d) {
          const int64_t i = (bg * T + j) * dh + d;
          K_[i] = synthetic_value(seed, 2 * i);
        }
        for (int64_t d = 0; d < dv; ++d) {
          const int64_t i = (bg * T + j) * dv + d;
          V_[i] = synthetic_value(seed, 2 * i + 1);
        }
        round_row(K_.data() + (bg * T + j) * dh, dh);
        round_row(V_.data() + (bg * T + j) * dv, dv);
      }
    len_ += n;
  }

  // x [B, n, q_in] -> output [B, n, out_dim] for positions len_ .. len_+n-1.
  Tensor append(const Tensor& x) override {
    check_append(spec_, opt_, len_, x);
    const int64_t B = opt_.batch, n = x.dim(1), T = opt_.max_tokens;
    const int64_t H = spec_.num_heads, Hkv = spec_.num_kv_heads, dh = spec_.head_dim, dv = spec_.head_dim_v;
    const int64_t group = H / Hkv;
    const Vec xs = x.to_f64();
    Vec q = project(xs, B * n, spec_.q), k = project(xs, B * n, spec_.k), v = project(xs, B * n, spec_.v);
    const std::optional<RopeTable> rope = spec_.rope ? std::optional<RopeTable>(rope_table_at(spec_, len_, n)) : std::nullopt;
    prepare_qk(spec_, rope ? &*rope : nullptr, q, B * n, k, B * n);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t g = 0; g < Hkv; ++g) {
          double* kr = K_.data() + ((b * Hkv + g) * T + len_ + r) * dh;
          double* vr = V_.data() + ((b * Hkv + g) * T + len_ + r) * dv;
          std::copy_n(k.data() + (b * n + r) * Hkv * dh + g * dh, dh, kr);
          std::copy_n(v.data() + (b * n + r) * Hkv * dv + g * dv, dv, vr);
          round_row(kr, dh);
          round_row(vr, dv);
        }
    Vec ctx(B * n * H * dv), w;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const double* Kh = K_.data() + (b * Hkv + h / group) * T * dh;
        const double* Vh = V_.data() + (b * Hkv + h / group) * T * dv;
        for (int64_t r = 0; r < n; ++r) {
          const int64_t i = len_ + r, j0 = rule_.first_key(i), j1 = i + 1;
          const double* qi = q.data() + (b * n + r) * H * dh + h * dh;
          w.assign(j1 - j0, 0.0);
          dot_rows(qi, Kh + j0 * dh, j1 - j0, dh, w.data());
          for (double& s : w) s = softcapped(spec_, spec_.scale * s);
          softmax_row(spec_, sinks_, h, w.data(), j1 - j0);
          weighted_rows(w.data(), j1 - j0, Vh + j0 * dv, dv, ctx.data() + (b * n + r) * H * dv + h * dv);
        }
      }
    len_ += n;
    const Vec out = spec_.out ? project(ctx, B * n, *spec_.out) : ctx;
    return Tensor::from_f64({B, n, spec_.out_dim()}, out);
  }

 private:
  // A cached row of d values as the cache holds it (float32: unchanged).
  void round_row(double* x, int64_t d) const {
    if (opt_.cache_dtype == CacheDtype::Float32) return;
    std::vector<float> f(x, x + d);
    kv_round_row(opt_.cache_dtype, f.data(), d);
    std::copy(f.begin(), f.end(), x);
  }

  AttentionSpec spec_;  // Tensors share their bytes: a cheap copy
  DecodeOptions opt_;
  MaskRule rule_;
  Vec sinks_ = spec_.sinks ? spec_.sinks->to_f64() : Vec();
  Vec K_, V_;
  int64_t len_ = 0;
};

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  bool computes_in_float64() const override { return true; }
  // Float64 loops for both: output projection and partial attention.
  std::optional<std::string> capability_gap(Capability c, const AttentionSpec& spec) const override {
    return c == Capability::PartialAttention ? partial_unsupported(spec) : std::nullopt;
  }
  // One thread, plain float64 loops (what `mha bench` rows report).
  nlohmann::json describe() const override { return {{"threads", 1}, {"simd", "scalar float64"}}; }
  std::optional<std::string> supports_decode(const AttentionSpec& spec) const override {
    return decode_unsupported(spec);
  }
  std::unique_ptr<DecodeSession> start_decode(const AttentionSpec& spec, const DecodeOptions& opt) override {
    if (decode_unsupported(spec)) return Backend::start_decode(spec, opt);  // throws the reason
    check_decode_options(spec, opt);
    if (spec.mla) return reference::make_mla_decode(spec, opt);
    return std::make_unique<ReferenceDecode>(spec, opt);
  }
  void project_rows(const Projection& p, const void* x, int64_t rows, void* y) override {
    const int64_t in = p.weight.dim(1);
    const double* xs = static_cast<const double*>(x);
    const Vec r = project(Vec(xs, xs + rows * in), rows, p);
    std::copy(r.begin(), r.end(), static_cast<double*>(y));
  }

  void attend_partial(const AttentionSpec& spec, const Tensor& q, const QueryBlock& qb, const KeyBlock& kv,
                      SoftmaxState& st) override {
    const int64_t B = q.dim(0), n = q.dim(1), H = spec.num_heads, dh = spec.head_dim, dv = spec.head_dim_v;
    const int64_t group = H / spec.num_kv_heads, kw = spec.num_kv_heads * dh, vw = spec.num_kv_heads * dv;
    const double c1 = spec.scale * 1.4426950408889634;  // base-2 units (backends/partial.h)
    const MaskRule rule(spec);
    const double* K = static_cast<const double*>(kv.k);
    const double* V = static_cast<const double*>(kv.v);
    std::vector<double> s(kv.rows);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < qb.rows; ++i)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t row = b * n + qb.row0 + i, g = h / group;
          const double* qv = q.data<double>() + row * H * dh + h * dh;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < kv.rows; ++j) {
            s[j] = -std::numeric_limits<double>::infinity();
            if (!rule.visible(qb.pos0 + i, kv.pos0 + j)) continue;
            const double* kr = K + (b * kv.rows + j) * kw + g * dh;
            double d = 0.0;
            for (int64_t e = 0; e < dh; ++e) d += qv[e] * kr[e];
            s[j] = d * c1;
            mx = std::max(mx, s[j]);
          }
          if (mx == -std::numeric_limits<double>::infinity()) continue;  // no key of the block is visible
          double& m = st.m.data<double>()[row * H + h];
          double& l = st.l.data<double>()[row * H + h];
          double* acc = st.acc.data<double>() + row * H * dv + h * dv;
          const double mnew = std::max(m, mx), c = std::exp2(m - mnew);  // c = 0 when m was -inf
          l *= c;
          for (int64_t e = 0; e < dv; ++e) acc[e] *= c;
          for (int64_t j = 0; j < kv.rows; ++j) {
            if (s[j] == -std::numeric_limits<double>::infinity()) continue;
            const double p = std::exp2(s[j] - mnew);
            const double* vr = V + (b * kv.rows + j) * vw + g * dv;
            l += p;
            for (int64_t e = 0; e < dv; ++e) acc[e] += p * vr[e];
          }
          m = mnew;
        }
  }

  std::optional<Tensor> project_output(const AttentionSpec& spec, const Tensor& context) override {
    const Projection& out = *spec.out;
    const int64_t rows = context.numel() / context.dim(context.ndim() - 1);
    Shape shape = context.shape();
    shape.back() = out.weight.dim(0);
    return Tensor::from_f64(shape, project(context.to_f64(), rows, out));
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) override {
    validate_inputs(spec, in);
    const int64_t B = in.query.dim(0), L = in.query.dim(1), S = in.key.dim(1);
    const int64_t H = spec.num_heads, Hkv = spec.num_kv_heads, dh = spec.head_dim, dv = spec.head_dim_v;
    const int64_t St = S + spec.extra_keys(), group = H / Hkv;
    const double inf = std::numeric_limits<double>::infinity();
    const MaskRule rule(spec);

    Vec xq = in.query.to_f64(), xk = in.key.to_f64(), xv = in.value.to_f64();
    Vec mask = in.mask ? in.mask->to_f64() : Vec();
    Vec bk = spec.bias_k ? spec.bias_k->to_f64() : Vec(), bv = spec.bias_v ? spec.bias_v->to_f64() : Vec();

    const std::optional<RopeTable> rope = spec.rope ? std::optional<RopeTable>(rope_table(spec, in)) : std::nullopt;
    Vec q, k, v;
    if (spec.mla) {  // the expanded form (model/mla.h); MLA always has a rope
      reference::mla_qkv(spec, *rope, xq, xk, B * L, q, k, v);
    } else {
      q = project(xq, B * L, spec.q), k = project(xk, B * S, spec.k), v = project(xv, B * S, spec.v);
      prepare_qk(spec, rope ? &*rope : nullptr, q, B * L, k, B * S);
    }
    const Vec sinks = spec.sinks ? spec.sinks->to_f64() : Vec();

    // Per-head views with the extra key rows appended: [B, H, *, d].
    Vec Q(B * H * L * dh), K(B * Hkv * St * dh), V(B * Hkv * St * dv);
    split_heads(q.data(), H * dh, B, L, L, H, dh, static_cast<const double*>(nullptr), Q.data());
    split_heads(k.data(), Hkv * dh, B, S, St, Hkv, dh, spec.bias_k ? bk.data() : nullptr, K.data());
    split_heads(v.data(), Hkv * dv, B, S, St, Hkv, dv, spec.bias_v ? bv.data() : nullptr, V.data());

    Vec raw(B * H * L * St), masked(B * H * L * St), W(B * H * L * St), ctx(B * L * H * dv, 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        // data() + offset, not &v[i]: with no keys at all (S_total = 0) K and V are empty.
        const double* Kh = K.data() + (b * Hkv + h / group) * St * dh;
        const double* Vh = V.data() + (b * Hkv + h / group) * St * dv;
        for (int64_t i = 0; i < L; ++i) {
          const double* qi = Q.data() + ((b * H + h) * L + i) * dh;
          int64_t row = ((b * H + h) * L + i) * St;
          dot_rows(qi, Kh, St, dh, raw.data() + row);
          for (int64_t j = 0; j < St; ++j) {
            const double s = raw[row + j];
            double m = softcapped(spec, spec.scale * s);
            if (in.mask) {
              const Tensor& mt = *in.mask;
              int64_t mb = mt.dim(0) == 1 ? 0 : b, mh = mt.dim(1) == 1 ? 0 : h, mi = mt.dim(2) == 1 ? 0 : i;
              m += mask[((mb * mt.dim(1) + mh) * mt.dim(2) + mi) * St + j];
            }
            if (!rule.visible(i, j)) m = -inf;
            masked[row + j] = m;
          }
          std::copy_n(masked.data() + row, St, W.data() + row);
          softmax_row(spec, sinks, h, W.data() + row, St);
          if (in.training && spec.dropout > 0.0)
            for (int64_t j = 0; j < St; ++j)
              W[row + j] = dropout_keep(in.dropout_seed, row + j, spec.dropout) ? W[row + j] / (1.0 - spec.dropout) : 0.0;
          weighted_rows(W.data() + row, St, Vh, dv, ctx.data() + (b * L + i) * H * dv + h * dv);
        }
      }

    AttentionResult r;
    Vec out = spec.out ? project(ctx, B * L, *spec.out) : ctx;
    r.output = Tensor::from_f64({B, L, spec.out_dim()}, out);
    if (opt.need_weights) r.weights = Tensor::from_f64({B, H, L, St}, W);
    if (opt.collect_stages) {
      r.stages = {{"q", Tensor::from_f64({B, H, L, dh}, Q)},
                  {"k", Tensor::from_f64({B, Hkv, St, dh}, K)},
                  {"v", Tensor::from_f64({B, Hkv, St, dv}, V)},
                  {"scores", Tensor::from_f64({B, H, L, St}, raw)},
                  {"masked_scores", Tensor::from_f64({B, H, L, St}, masked)},
                  {"weights", Tensor::from_f64({B, H, L, St}, W)},
                  {"context", Tensor::from_f64({B, L, H * dv}, ctx)},
                  {"output", r.output}};
    }
    return r;
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace mha
