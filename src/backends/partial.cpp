#include "backends/partial.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "model/attention.h"

namespace mha {

const char* capability_name(Capability c) {
  switch (c) {
    case Capability::OutputProjection: return "separate output projection";
    case Capability::PartialAttention: return "partial attention";
    case Capability::AttentionWeights: return "attention weights";
  }
  return "?";
}

std::optional<std::string> partial_unsupported(const AttentionSpec& spec) {
  if (spec.softcap > 0.0) return std::string("partial attention has no logit softcap (run in one process)");
  if (spec.sinks) return std::string("partial attention has no attention sinks (run in one process)");
  if (spec.mla) return std::string("partial attention has no multi-head latent attention (run in one process)");
  return std::nullopt;
}

SoftmaxState SoftmaxState::empty(DType dt, int64_t B, int64_t n, int64_t H, int64_t dv) {
  SoftmaxState s;
  s.acc = Tensor(dt, {B, n, H * dv});
  s.l = Tensor(dt, {B, n, H});
  s.m = Tensor(dt, {B, n, H});
  s.reset();
  return s;
}

void SoftmaxState::reset() {
  std::memset(acc.raw(), 0, acc.nbytes());
  std::memset(l.raw(), 0, l.nbytes());
  const double inf = std::numeric_limits<double>::infinity();
  if (m.dtype() == DType::F64) std::fill(m.data<double>(), m.data<double>() + m.numel(), -inf);
  else std::fill(m.data<float>(), m.data<float>() + m.numel(), static_cast<float>(-inf));
}

namespace {

// Per (row, head): m = max(ma, mb), each side scaled by 2^(its m - m).
template <class T>
void merge(SoftmaxState& a, const SoftmaxState& b) {
  const int64_t rows = a.m.numel(), dv = a.acc.numel() / std::max<int64_t>(rows, 1);
  T *am = a.m.data<T>(), *al = a.l.data<T>(), *acc = a.acc.data<T>();
  const T *bm = b.m.data<T>(), *bl = b.l.data<T>(), *bacc = b.acc.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T m = std::max(am[r], bm[r]);
    if (m == -std::numeric_limits<T>::infinity()) continue;  // neither saw a key
    const T ca = std::exp2(am[r] - m), cb = std::exp2(bm[r] - m);
    al[r] = al[r] * ca + bl[r] * cb;
    for (int64_t e = 0; e < dv; ++e) acc[r * dv + e] = acc[r * dv + e] * ca + bacc[r * dv + e] * cb;
    am[r] = m;
  }
}

template <class T>
void normalise(SoftmaxState& s) {
  const int64_t rows = s.l.numel(), dv = s.acc.numel() / std::max<int64_t>(rows, 1);
  T* acc = s.acc.data<T>();
  const T* l = s.l.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T inv = l[r] > T(0) ? T(1) / l[r] : std::numeric_limits<T>::quiet_NaN();
    for (int64_t e = 0; e < dv; ++e) acc[r * dv + e] *= inv;
  }
}

}  // namespace

void merge_states(SoftmaxState& into, const SoftmaxState& other) {
  if (into.m.shape() != other.m.shape() || into.acc.shape() != other.acc.shape() ||
      into.m.dtype() != other.m.dtype())
    throw std::logic_error("merge_states: the states cover different queries");
  if (into.m.dtype() == DType::F64) merge<double>(into, other);
  else merge<float>(into, other);
}

void normalise_state(SoftmaxState& s) {
  if (s.m.dtype() == DType::F64) normalise<double>(s);
  else normalise<float>(s);
}

}  // namespace mha
