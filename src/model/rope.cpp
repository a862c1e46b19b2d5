#include "model/rope.h"

#include <cmath>

namespace mha {

std::vector<float> rope_inv_freq(const RotaryEmbedding& rope, int64_t head_dim) {
  // theta ** (arange(0, dh, 2).float() / dh): a float32 exponent and a
  // float32 power (computed in double and rounded once), then 1.0 / it in float32.
  const float theta = static_cast<float>(rope.theta);
  std::vector<float> inv(head_dim / 2);
  for (int64_t f = 0; f < head_dim / 2; ++f) {
    const float e = static_cast<float>(2 * f) / static_cast<float>(head_dim);
    const float p = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(e)));
    inv[f] = 1.0f / p;
  }
  return inv;
}

namespace {

// Fills t (rows, L, half set) with position pos[r] (or first + r) for row r.
void fill_table(RopeTable& t, const AttentionSpec& spec, const int64_t* pos, int64_t first) {
  const std::vector<float> inv = rope_inv_freq(*spec.rope, spec.head_dim);
  t.cos.resize(t.rows * t.L * t.half);
  t.sin.resize(t.cos.size());
  for (int64_t r = 0; r < t.rows * t.L; ++r) {
    // position_ids.float(): positions past 2^24 round, as in the modules.
    const float p = static_cast<float>(pos ? pos[r] : first + r);
    for (int64_t f = 0; f < t.half; ++f) {
      const double angle = static_cast<double>(p * inv[f]);  // the float32 product
      t.cos[r * t.half + f] = static_cast<float>(std::cos(angle));
      t.sin[r * t.half + f] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace

RopeTable rope_table(const AttentionSpec& spec, const AttentionInputs& in) {
  RopeTable t;
  t.L = in.query.dim(1);
  t.half = spec.head_dim / 2;
  t.rows = in.positions ? in.positions->dim(0) : 1;
  fill_table(t, spec, in.positions ? in.positions->data<int64_t>() : nullptr, 0);
  return t;
}

RopeTable rope_table_at(const AttentionSpec& spec, int64_t first, int64_t n) {
  RopeTable t;
  t.L = n;
  t.half = spec.head_dim / 2;
  t.rows = 1;
  fill_table(t, spec, nullptr, first);
  return t;
}

}  // namespace mha
