#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace mha {

namespace {

constexpr double kPi = 3.14159265358979323846;

// theta ** (arange(0, dim, 2).float() / dim): a float32 exponent and a
// float32 power (computed in double and rounded once).
std::vector<float> powers(const RotaryEmbedding& rope, int64_t dim) {
  const float theta = static_cast<float>(rope.theta);
  std::vector<float> p(dim / 2);
  for (int64_t f = 0; f < dim / 2; ++f) {
    const float e = static_cast<float>(2 * f) / static_cast<float>(dim);
    p[f] = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(e)));
  }
  return p;
}

// _compute_llama3_parameters on the default inv_freq, step by step in
// float32 as torch runs it: `2 * pi / inv_freq` is reciprocal(inv_freq) *
// float32(2 pi) (Tensor.__rtruediv__), and Python scalars meet float32
// tensors as float32.
void llama3(const RotaryEmbedding& r, std::vector<float>& inv) {
  const double old_len = static_cast<double>(r.original_max_positions);
  const float low_wl = static_cast<float>(old_len / r.low_freq_factor);
  const float high_wl = static_cast<float>(old_len / r.high_freq_factor);
  const float factor = static_cast<float>(r.factor), two_pi = static_cast<float>(2 * kPi);
  const float low_ff = static_cast<float>(r.low_freq_factor);
  const float band = static_cast<float>(r.high_freq_factor - r.low_freq_factor);
  for (float& x : inv) {
    const float wavelen = (1.0f / x) * two_pi;
    const float scaled = wavelen > low_wl ? x / factor : x;
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_len) - low_ff) / band;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
    x = medium ? smoothed : scaled;
  }
}

// _compute_yarn_parameters: interpolated (1 / (factor * p)) below the
// correction range, extrapolated (1 / p) above it, a linear ramp between;
// the range in float64 as Python computes it, the blend in float32.
void yarn(const RotaryEmbedding& r, int64_t dim, const std::vector<float>& p, std::vector<float>& inv) {
  const double orig = static_cast<double>(r.original_max_positions), base = r.theta;
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(orig / (rotations * 2 * kPi))) / (2 * std::log(base));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: "prevent singularity"
  const float factor = static_cast<float>(r.factor), lo = static_cast<float>(low);
  const float span = static_cast<float>(high - low);
  for (size_t f = 0; f < inv.size(); ++f) {
    const float ramp = std::min(1.0f, std::max(0.0f, (static_cast<float>(f) - lo) / span));
    const float extrapolation = 1.0f - ramp;  // inv_freq_extrapolation_factor
    const float interp = 1.0f / (factor * p[f]), extrap = 1.0f / p[f];
    inv[f] = interp * (1.0f - extrapolation) + extrap * extrapolation;
  }
}

}  // namespace

int64_t rope_rotary_dim(const RotaryEmbedding& rope, int64_t head_dim) {
  return rope.rotary_dim > 0 ? rope.rotary_dim : head_dim;
}

std::vector<float> rope_inv_freq(const RotaryEmbedding& rope, int64_t head_dim) {
  const int64_t dim = rope_rotary_dim(rope, head_dim);
  const std::vector<float> p = powers(rope, dim);
  std::vector<float> inv(p.size());
  for (size_t f = 0; f < p.size(); ++f) inv[f] = 1.0f / p[f];
  switch (rope.scaling) {
    case RopeScaling::None: break;
    case RopeScaling::Linear:
      for (float& x : inv) x /= static_cast<float>(rope.factor);
      break;
    case RopeScaling::Llama3: llama3(rope, inv); break;
    case RopeScaling::Yarn: yarn(rope, dim, p, inv); break;
  }
  return inv;
}

namespace {

// Fills t (rows, L set) with position pos[r] (or first + r) for row r.
void fill_table(RopeTable& t, const AttentionSpec& spec, const int64_t* pos, int64_t first) {
  const std::vector<float> inv = rope_inv_freq(*spec.rope, spec.head_dim);
  t.half = static_cast<int64_t>(inv.size());
  t.head_dim = spec.head_dim;
  t.interleaved = spec.rope->interleaved;
  // emb.cos() * attention_scaling: a float32 product (exact when it is 1).
  const float af = static_cast<float>(spec.rope->attention_factor);
  t.cos.resize(t.rows * t.L * t.half);
  t.sin.resize(t.cos.size());
  for (int64_t r = 0; r < t.rows * t.L; ++r) {
    // position_ids.float(): positions past 2^24 round, as in the modules.
    const float p = static_cast<float>(pos ? pos[r] : first + r);
    for (int64_t f = 0; f < t.half; ++f) {
      const double angle = static_cast<double>(p * inv[f]);  // the float32 product
      t.cos[r * t.half + f] = static_cast<float>(std::cos(angle)) * af;
      t.sin[r * t.half + f] = static_cast<float>(std::sin(angle)) * af;
    }
  }
}

}  // namespace

RopeTable rope_table(const AttentionSpec& spec, const AttentionInputs& in) {
  RopeTable t;
  t.L = in.query.dim(1);
  t.rows = in.positions ? in.positions->dim(0) : 1;
  fill_table(t, spec, in.positions ? in.positions->data<int64_t>() : nullptr, 0);
  return t;
}

RopeTable rope_table_at(const AttentionSpec& spec, int64_t first, int64_t n) {
  RopeTable t;
  t.L = n;
  t.rows = 1;
  fill_table(t, spec, nullptr, first);
  return t;
}

}  // namespace mha
