#include "ttsim/tile.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "util/error.h"
#include "util/huge_pages.h"

namespace mha::ttsim {

namespace {

// t's format, shapes and data sized for them (values left as they were).
void set_tile_shape(TileTensor& t, const Shape& shape, DataFormat format) {
  if (shape.empty()) throw InputError("tt-sim: a tile tensor needs at least one dimension");
  t.format = format;
  t.shape = shape;
  shape_numel(shape);  // validates dims and overflow
  int n = static_cast<int>(shape.size());
  t.cols = shape[n - 1];
  t.rows = n >= 2 ? shape[n - 2] : 1;
  t.batch = 1;
  for (int i = 0; i + 2 < n; ++i) t.batch *= shape[i];
  t.prows = pad_to_tile(t.rows);
  t.pcols = pad_to_tile(t.cols);
  const size_t values = static_cast<size_t>(t.batch * t.prows * t.pcols);
  if (t.data.capacity() > 2 * values) std::vector<float>().swap(t.data);
  // Huge pages before the first touch: a KV cache's fresh buffer otherwise
  // takes a page fault per 4 KiB.
  if (t.data.capacity() < values) {
    std::vector<float>().swap(t.data);
    t.data.reserve(values);
    advise_huge_pages(t.data.data(), values * sizeof(float));
  }
  t.data.resize(values);
}

}  // namespace

TileTensor make_tile_tensor(const Shape& shape, DataFormat format) {
  TileTensor t;
  set_tile_shape(t, shape, format);
  return t;
}

void requantize_host(TileTensor& t) {
  host_quantize(t.data.data(), t.data.data(), static_cast<int64_t>(t.data.size()), t.format);
}

TileTensor to_tile_layout(const float* values, const Shape& shape, DataFormat format, float pad_value) {
  TileTensor t;
  to_tile_layout(values, shape, format, t, pad_value);
  return t;
}

void to_tile_layout(const float* values, const Shape& shape, DataFormat format, TileTensor& t, float pad_value) {
  set_tile_shape(t, shape, format);
  // Row by row, each quantised while it is in cache (a KV cache's
  // conversion is most of a decode op's host work). A padded row is whole
  // face rows, the unit block-float formats quantise.
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.prows; ++r) {
      float* row = &t.at(b, r, 0);
      const int64_t n = r < t.rows ? t.cols : 0;
      const float* src = values + (b * t.rows + r) * t.cols;
      if (n == t.pcols) {  // a whole row: quantised straight from the source
        host_quantize(src, row, n, t.format);
        continue;
      }
      if (n > 0) std::copy(src, src + n, row);
      std::fill(row + n, row + t.pcols, pad_value);
      host_quantize(row, row, t.pcols, t.format);
    }
}

TileTensor to_tile_layout(const Tensor& t, DataFormat format, float pad_value) {
  std::vector<float> v = t.to_f32();
  return to_tile_layout(v.data(), t.shape(), format, pad_value);
}

std::vector<float> to_row_major(const TileTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.batch * t.rows * t.cols));
  to_row_major(t, out.data());
  return out;
}

void to_row_major(const TileTensor& t, float* out) {
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      std::memcpy(out + (b * t.rows + r) * t.cols, t.matrix(b) + r * t.pcols, static_cast<size_t>(t.cols) * 4);
}

Tensor to_tensor(const TileTensor& t) { return Tensor::from_f32(t.shape, to_row_major(t)); }

namespace {

// Position in a padded row-major matrix of the i-th element in tile order.
inline void tile_order_pos(int64_t i, int64_t pcols, int64_t& r, int64_t& c) {
  int64_t tiles_per_row = pcols / kTile;
  int64_t tile = i / (kTile * kTile), in_tile = i % (kTile * kTile);
  int64_t face = in_tile / (kFace * kFace), in_face = in_tile % (kFace * kFace);
  r = (tile / tiles_per_row) * kTile + (face / 2) * kFace + in_face / kFace;
  c = (tile % tiles_per_row) * kTile + (face % 2) * kFace + in_face % kFace;
}

}  // namespace

std::vector<float> tilize(const TileTensor& t) {
  std::vector<float> out(t.data.size());
  int64_t per = t.prows * t.pcols;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t i = 0; i < per; ++i) {
      int64_t r, c;
      tile_order_pos(i, t.pcols, r, c);
      out[b * per + i] = t.at(b, r, c);
    }
  return out;
}

TileTensor untilize(const std::vector<float>& tiled, const Shape& shape, DataFormat format) {
  TileTensor t = make_tile_tensor(shape, format);
  if (tiled.size() != t.data.size())
    throw std::logic_error("untilize: tiled data has the wrong number of elements");
  int64_t per = t.prows * t.pcols;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t i = 0; i < per; ++i) {
      int64_t r, c;
      tile_order_pos(i, t.pcols, r, c);
      t.at(b, r, c) = tiled[b * per + i];
    }
  return t;
}

}  // namespace mha::ttsim
