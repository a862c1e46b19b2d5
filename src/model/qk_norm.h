#pragma once
// Per-head RMSNorm of q and k (AttentionSpec::qk_norm): after the
// projection, before the rotary embedding, over each head's head_dim
// values, as Qwen3RMSNorm / Gemma3RMSNorm compute it:
//   y = (x * rsqrt(mean(x^2) + eps)) * w        (w, or 1 + w with offset_one)
// At the activation's precision: float32 on cpu (the mean's sum kept in
// double, which is within float32 rounding of torch's float32 reduction),
// float64 on the reference.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/attention.h"

namespace mha {

// The weights as multiplied (w, or 1 + w computed at T's precision, as
// Gemma's (1.0 + weight.float()) is) and eps, at precision T.
template <class T>
struct QkNormWeights {
  std::vector<T> q, k;
  T eps = 0;
};

template <class T>
std::optional<QkNormWeights<T>> qk_norm_weights(const AttentionSpec& spec) {
  if (!spec.qk_norm) return std::nullopt;
  const QkNorm& n = *spec.qk_norm;
  QkNormWeights<T> w;
  auto take = [&](const Tensor& t) {
    const std::vector<double> v = t.to_f64();
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = n.offset_one ? T(1) + static_cast<T>(v[i]) : static_cast<T>(v[i]);
    return out;
  };
  w.q = take(n.q_weight);
  w.k = take(n.k_weight);
  w.eps = static_cast<T>(n.eps);
  return w;
}

// Normalises every head (width dh, at columns h*dh) of n rows of x [rows, ld].
template <class T>
void apply_qk_norm_rows(const std::vector<T>& w, T eps, T* x, int64_t ld, int64_t n, int64_t heads, int64_t dh) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + r * ld + h * dh;
      double ss = 0.0;
      for (int64_t d = 0; d < dh; ++d) ss += static_cast<double>(v[d]) * static_cast<double>(v[d]);
      const T mean = static_cast<T>(ss / static_cast<double>(dh));
      const T inv = T(1) / std::sqrt(mean + eps);
      for (int64_t d = 0; d < dh; ++d) v[d] = (v[d] * inv) * w[d];
    }
}

}  // namespace mha
