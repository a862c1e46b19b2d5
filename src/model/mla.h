#pragma once
// Multi-head latent attention's steps between the projections and the
// attention (AttentionSpec::mla, model/attention.h), at the activations'
// precision T (double on the reference backend, float on cpu): written once
// for both backends and both forms, as DeepseekV3Attention computes them
// (transformers' models/deepseek_v3/modeling_deepseek_v3.py at 00b676f):
//   DeepseekV3RMSNorm: x * rsqrt(mean(x^2) + eps) * w, eps 1e-6 (the module
//     builds both norms with the default, not the config's rms_norm_eps)
//   rope: the rotary table of the spec (rotary_dim = rope_dim) on each q
//     head's trailing rope_dim values and on the latent row's kr
#include <cstdint>
#include <vector>

#include "model/attention.h"
#include "model/qk_norm.h"
#include "model/rope.h"

namespace mha {

// The two RMSNorms' weights at precision T (q empty without q_lora_rank).
template <class T>
struct MlaNorms {
  std::vector<T> q, kv;
  T eps = 0;
};

template <class T>
MlaNorms<T> mla_norms(const Mla& m) {
  auto take = [](const Tensor& t) {
    const std::vector<double> v = t.to_f64();
    return std::vector<T>(v.begin(), v.end());
  };
  MlaNorms<T> w;
  if (m.q_norm) w.q = take(*m.q_norm);
  w.kv = take(m.kv_norm);
  w.eps = static_cast<T>(m.eps);
  return w;
}

// n rows of q_a_proj's output [n, q_lora_rank] (stride ld), normalised in place.
template <class T>
void mla_norm_query_latent(const Mla& m, const MlaNorms<T>& w, T* x, int64_t ld, int64_t n) {
  apply_qk_norm_rows(w.q, w.eps, x, ld, n, 1, m.q_lora_rank);
}

// n latent rows ckv [n, kv_lora_rank + rope_dim] (stride ld), table rows
// row0 .. row0 + n - 1, in place: c normalised, kr rotated. What the
// latent cache holds.
template <class T>
void mla_prepare_latent(const Mla& m, const MlaNorms<T>& w, const RopeTable& t, T* ckv, int64_t ld, int64_t row0,
                        int64_t n) {
  apply_qk_norm_rows(w.kv, w.eps, ckv, ld, n, 1, m.kv_lora_rank);
  apply_rope_rows(t, ckv + m.kv_lora_rank, ld, row0, n, 1);
}

// n rows of q [n, H*(dn + dr)] (stride ld): each head's last dr rotated.
// The table's head stride is the spec's head_dim, dn + dr.
template <class T>
void mla_rotate_query(const Mla& m, const RopeTable& t, T* q, int64_t ld, int64_t row0, int64_t n, int64_t heads) {
  apply_rope_rows(t, q + m.nope_dim, ld, row0, n, heads);
}

// The expanded form's keys K [n, H*(dn + dr)] and values V [n, H*dv] from
// kv = c @ kv_b^T [n, H*(dn + dv)] and the rotated kr of ckv (stride ld).
template <class T>
void mla_expand(const Mla& m, int64_t heads, int64_t dv, const T* kv, const T* ckv, int64_t ld, int64_t n, T* K, T* V) {
  const int64_t dn = m.nope_dim, dr = m.rope_dim, dq = dn + dr, dkv = dn + dv;
  for (int64_t r = 0; r < n; ++r) {
    const T* kr = ckv + r * ld + m.kv_lora_rank;
    for (int64_t h = 0; h < heads; ++h) {
      const T* src = kv + (r * heads + h) * dkv;
      T* k = K + (r * heads + h) * dq;
      for (int64_t d = 0; d < dn; ++d) k[d] = src[d];
      for (int64_t d = 0; d < dr; ++d) k[dn + d] = kr[d];
      T* v = V + (r * heads + h) * dv;
      for (int64_t d = 0; d < dv; ++d) v[d] = src[dn + d];
    }
  }
}

}  // namespace mha
