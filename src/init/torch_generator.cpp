#include "init/torch_generator.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <stdexcept>

#include "init/box_muller16.h"

namespace mha {
namespace {

constexpr double kPi = 3.14159265358979323846;

// at::uniform_real_distribution<float>: the low 24 bits of one 32-bit draw
// scaled to [0, 1). torch's AVX2 build fuses x * (to - from) + from.
float uniform_float(uint32_t draw, float from, float to) {
  const float x = static_cast<float>(draw & ((1u << 24) - 1)) * (1.0f / 16777216.0f);
  return std::fmaf(x, to - from, from);
}

// The double flavour uses 53 bits of a 64-bit draw.
double uniform_double01(uint64_t draw) {
  return static_cast<double>(draw & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace

void TorchGenerator::manual_seed(uint64_t seed) {
  engine_.seed(static_cast<std::mt19937::result_type>(seed & 0xffffffffu));
  next_double_normal_.reset();
}

uint64_t TorchGenerator::random64() {
  const uint64_t hi = random();
  const uint64_t lo = random();
  return (hi << 32) | lo;
}

void TorchGenerator::uniform_(float* data, int64_t n, double from, double to) {
  const float from_f = static_cast<float>(from), to_f = static_cast<float>(to);
  for (int64_t i = 0; i < n; ++i) data[i] = uniform_float(random(), from_f, to_f);
}

// at::normal_distribution<double> on the CPU generator: Box-Muller on two
// 53-bit uniforms, cosine sample returned, sine sample cached for the next
// call. torch 1.13 takes log(1 - u2), not log1p(-u2): they differ in the
// last double bit for some draws, which float64 normals expose.
double TorchGenerator::normal_double(double mean, double std) {
  double n;
  if (next_double_normal_) {
    n = *next_double_normal_;
    next_double_normal_.reset();
  } else {
    const double u1 = uniform_double01(random64());
    const double u2 = uniform_double01(random64());
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = 2.0 * kPi * u1;
    next_double_normal_ = r * std::sin(theta);
    n = r * std::cos(theta);
  }
  return std::fma(n, std, mean);
}

void TorchGenerator::normal_(float* data, int64_t n, double mean, double std) {
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(normal_double(mean, std));
    return;
  }
  const float mean_f = static_cast<float>(mean), std_f = static_cast<float>(std);
  for (int64_t i = 0; i < n; ++i) data[i] = uniform_float(random(), 0.0f, 1.0f);
  for (int64_t i = 0; i + 16 <= n; i += 16) detail::box_muller16(data + i, mean_f, std_f);
  if (n % 16 != 0) {
    // torch refills and transforms the last 16 values, overwriting the
    // normals already computed for the overlap with the last full block.
    float* tail = data + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform_float(random(), 0.0f, 1.0f);
    detail::box_muller16(tail, mean_f, std_f);
  }
}

Tensor TorchGenerator::rand(const Shape& shape) {
  Tensor t(DType::F32, shape);
  uniform_(t.data<float>(), t.numel(), 0.0, 1.0);
  return t;
}

Tensor TorchGenerator::randn(const Shape& shape) {
  Tensor t(DType::F32, shape);
  normal_(t.data<float>(), t.numel(), 0.0, 1.0);
  return t;
}

Tensor TorchGenerator::rows(const Shape& shape, const std::vector<std::pair<int64_t, int64_t>>& ranges, bool normal) {
  const int64_t B = shape.at(0), L = shape.at(1), numel = shape_numel(shape);
  const int64_t row = B * L > 0 ? numel / (B * L) : 0;
  int64_t n = 0, prev_end = 0;
  for (const auto& [start, len] : ranges) {
    if (start < prev_end || len < 0 || start + len > L) throw std::logic_error("TorchGenerator::rows: bad range");
    prev_end = start + len;
    n += len;
  }
  Shape out_shape = shape;
  out_shape[1] = n;
  Tensor out(DType::F32, out_shape);
  float* dst = out.data<float>();
  // Wanted spans of the flat tensor, in increasing order: {first value, count, where in out}.
  struct Span {
    int64_t first, count, to;
  };
  std::vector<Span> spans;
  int64_t to = 0;
  for (int64_t b = 0; b < B; ++b)
    for (const auto& [start, len] : ranges) {
      if (len > 0) spans.push_back({(b * L + start) * row, len * row, to});
      to += len * row;
    }
  if (normal && (numel < 16 || numel % 16 != 0)) {
    const Tensor whole = randn(shape);
    for (const Span& s : spans) std::memcpy(dst + s.to, whole.data<float>() + s.first, s.count * sizeof(float));
    return out;
  }
  constexpr int64_t kPiece = int64_t{1} << 20;  // a multiple of 16: Box-Muller blocks stay aligned
  std::vector<float> piece;
  int64_t lo = 0, pos = 0;  // piece holds values [lo, pos); pos values drawn so far
  for (const Span& s : spans)
    for (int64_t done = 0; done < s.count;) {
      const int64_t at = s.first + done;
      if (piece.empty() || at < lo || at >= pos) {
        const int64_t p0 = at / kPiece * kPiece;  // >= pos: spans increase and pieces are aligned
        if (p0 > pos) engine_.discard(static_cast<unsigned long long>(p0 - pos));  // one draw per value skipped
        const int64_t len = std::min(kPiece, numel - p0);
        piece.resize(len);
        for (int64_t i = 0; i < len; ++i) piece[i] = uniform_float(random(), 0.0f, 1.0f);
        if (normal)
          for (int64_t i = 0; i + 16 <= len; i += 16) detail::box_muller16(piece.data() + i, 0.0f, 1.0f);
        lo = p0, pos = p0 + len;
      }
      const int64_t take = std::min(s.count - done, pos - at);
      std::memcpy(dst + s.to + done, piece.data() + (at - lo), take * sizeof(float));
      done += take;
    }
  return out;
}

}  // namespace mha
