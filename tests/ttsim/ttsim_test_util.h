#pragma once
// Helpers the tt-sim suites share (tests/ttsim/), written once: inputs drawn
// from a seed, paged caches and row slices, and the bit-for-bit comparisons.
// One definition each also lets the area's files compile in unity batches
// (tests/CMakeLists.txt), where two files' helpers of one name would clash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ttsim_single_op.h"
#include "support/test_support.h"
#include "tensor/half.h"
#include "tensor/tensor.h"
#include "ttsim/exec.h"
#include "ttsim/formats.h"
#include "ttsim/tile.h"

namespace mha::ttsim_test {

using ttsim::DataFormat;
using ttsim::TileTensor;

// The scalar model: every fast path is held to it bit for bit.
inline const ttsim::Exec kOracle{ttsim::simd::Isa::Scalar, nullptr};
inline const float kInf = std::numeric_limits<float>::infinity();
inline float bits(uint32_t u) { return f32_from_bits(u); }

// n values of scale * N(0, 1) from seed.
inline std::vector<float> normal(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * d(g);
  return v;
}

// A tensor of shape s of normal(seed, scale) values, in tile layout as f.
inline TileTensor tiles(const Shape& s, uint32_t seed, DataFormat f, float scale = 1.0f) {
  const std::vector<float> v = normal(shape_numel(s), seed, scale);
  return ttsim::to_tile_layout(v.data(), s, f);
}

// Same shape and every float the same bits (so -0 != 0 and NaNs compare).
inline ::testing::AssertionResult same_bits(const TileTensor& a, const TileTensor& b) {
  if (a.shape != b.shape || a.data.size() != b.data.size())
    return ::testing::AssertionFailure() << "shape " << shape_str(a.shape) << " vs " << shape_str(b.shape);
  for (size_t i = 0; i < a.data.size(); ++i)
    if (std::memcmp(&a.data[i], &b.data[i], 4) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a.data[i] << " vs " << b.data[i];
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " vs " << shape_str(want.shape());
  if (got.dtype() != DType::F32 || want.dtype() != DType::F32) return ::testing::AssertionFailure() << "not float32";
  const float *a = got.data<float>(), *b = want.data<float>();
  for (int64_t i = 0; i < got.numel(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_bits(const Tensor& got, const TileTensor& want) {
  return same_bits(got, ttsim::to_tensor(want));
}

inline ::testing::AssertionResult same_bits(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], 4) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": want " << want[i] << " got " << got[i];
  return ::testing::AssertionSuccess();
}

// Normal values (stddev `scale`, seed) in format f, tiled.
inline TileTensor randn_tile(const Shape& s, DataFormat f, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (float& x : v) x = d(g);
  return ttsim::to_tile_layout(v.data(), s, f);
}

// The first n rows of x's values, tiled again (rows quantise independently).
inline TileTensor first_rows(const TileTensor& x, int64_t n) {
  Shape s = x.shape;
  s[2] = n;
  std::vector<float> v;
  for (int64_t b = 0; b < x.batch; ++b)
    for (int64_t r = 0; r < n; ++r) v.insert(v.end(), x.matrix(b) + r * x.pcols, x.matrix(b) + r * x.pcols + x.cols);
  return ttsim::to_tile_layout(v.data(), s, x.format);
}

// x's values with zeros appended to `rows` rows and `cols` columns, tiled
// again: keys a partial tile pads, made explicit.
inline TileTensor zero_extended(const TileTensor& x, int64_t rows, int64_t cols) {
  Shape s = x.shape;
  s[2] = rows;
  s[3] = cols;
  std::vector<float> v(static_cast<size_t>(shape_numel(s)), 0.0f);
  for (int64_t b = 0; b < x.batch; ++b)
    for (int64_t r = 0; r < x.rows; ++r)
      std::copy(x.matrix(b) + r * x.pcols, x.matrix(b) + r * x.pcols + x.cols, v.begin() + (b * rows + r) * cols);
  return ttsim::to_tile_layout(v.data(), s, x.format);
}

// A [1, 1, rows, cols] mask in format f: 0 on the first `valid` keys of
// every row, -inf on the rest.
inline TileTensor key_mask(int64_t rows, int64_t cols, int64_t valid, DataFormat f) {
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(i * cols + j)] = j < valid ? 0.0f : -kInf;
  return ttsim::to_tile_layout(m.data(), {1, 1, rows, cols}, f);
}

// x [..., d]: its first n columns (keep_width = false), or those columns
// and zeros to d (keep_width = true): flash MLA's V read from K, as the
// plain ops take it.
inline Tensor columns(const Tensor& x, int64_t n, bool keep_width) {
  const int64_t d = x.shape().back(), rows = x.numel() / d;
  Shape s = x.shape();
  if (!keep_width) s.back() = n;
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data<float>() + r * d;
    out.insert(out.end(), row, row + n);
    if (keep_width) out.insert(out.end(), static_cast<size_t>(d - n), 0.0f);
  }
  return Tensor::from_f32(s, out);
}

// A page table: user u's j-th block of bs positions is block table[u][j] of
// a paged cache [blocks, heads, bs, dh].
using PageTable = std::vector<std::vector<int64_t>>;

// x [b, heads, S, dh] written into `cache` [blocks, heads, bs, dh] as `table`
// pages it: user u's positions [j * bs, (j + 1) * bs) go to block
// table[u][j]. Blocks the table does not name keep what `cache` held.
inline Tensor paged_cache(const Tensor& x, const PageTable& table, Tensor cache) {
  const int64_t nh = x.dim(1), S = x.dim(2), dh = x.dim(3), bs = cache.dim(2);
  float* c = cache.data<float>();
  const float* v = x.data<float>();
  for (int64_t u = 0; u < x.dim(0); ++u) {
    const std::vector<int64_t>& blocks = table[static_cast<size_t>(u)];
    for (int64_t j = 0; j < static_cast<int64_t>(blocks.size()); ++j)
      for (int64_t h = 0; h < nh; ++h)
        std::memcpy(c + (blocks[static_cast<size_t>(j)] * nh + h) * bs * dh, v + ((u * nh + h) * S + j * bs) * dh,
                    4 * bs * dh);
  }
  return cache;
}

// A float32 tensor of shape s, every value v: a paged cache whose unused
// blocks hold v.
inline Tensor filled(const Shape& s, float v) {
  return Tensor::from_f32(s, std::vector<float>(static_cast<size_t>(shape_numel(s)), v));
}

// Positions [r0, r1) of x [b, heads, S, dh]: a chunk's queries, or the rows
// of a whole sequence's output that the chunk's output must equal.
inline Tensor positions(const Tensor& x, int64_t r0, int64_t r1) {
  const int64_t bh = x.dim(0) * x.dim(1), S = x.dim(2), dh = x.dim(3);
  std::vector<float> out;
  for (int64_t i = 0; i < bh; ++i)
    out.insert(out.end(), x.data<float>() + (i * S + r0) * dh, x.data<float>() + (i * S + r1) * dh);
  return Tensor::from_f32({x.dim(0), x.dim(1), r1 - r0, dh}, out);
}

// `mha op`'s device operation in process (the CLI's path) on 2 threads:
// inputs named q, k, v (Q in bfloat16, the others in kv), at tt_metal
// `profile` unless opts name one.
inline ttsim::OpResult run_device_op(const std::string& op, const std::vector<Tensor>& in,
                                     nlohmann::ordered_json opts, DataFormat kv, const char* profile) {
  ttsim::OpRequest r;
  r.op = op;
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < in.size(); ++i) r.inputs.push_back({names[i], in[i], i == 0 ? DataFormat::Bfloat16 : kv});
  if (!opts.contains("tt_metal")) opts["tt_metal"] = profile;
  opts["threads"] = 2;
  r.options = opts;
  return ttsim::run_tt_op(r);
}

// Pearson correlation of two equally long arrays.
inline double pcc(const std::vector<double>& a, const std::vector<double>& b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(a.size()), mb /= static_cast<double>(b.size());
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
// A path in the repository.
inline std::string repo(const std::string& rel) { return test::source_dir() + "/" + rel; }

}  // namespace mha::ttsim_test
