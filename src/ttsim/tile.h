#pragma once
// TT-NN TILE_LAYOUT: a tensor's last two dims are padded up to multiples of
// 32 and cut into 32x32 tiles of four 16x16 faces (face order: top-left,
// top-right, bottom-left, bottom-right; each face row-major).
//
// TileTensor keeps the padded matrices row-major (batch x prow x pcol), which
// makes the matrix unit loops plain; a face row is then any 16 consecutive
// values starting at a column that is a multiple of 16, which is exactly the
// unit block-float formats share an exponent over. tilize()/untilize() give
// the device's element order when it matters (tests, byte-level dumps).
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"
#include "ttsim/formats.h"

namespace mha::ttsim {

constexpr int64_t kTile = 32;
constexpr int64_t kFace = 16;

inline int64_t pad_to_tile(int64_t n) { return (n + kTile - 1) / kTile * kTile; }

struct TileTensor {
  DataFormat format = DataFormat::Bfloat16;
  Shape shape;       // logical shape; a 1-D shape (n) is treated as (1, n)
  int64_t batch = 1; // product of all dims but the last two
  int64_t rows = 0, cols = 0;    // logical last two dims
  int64_t prows = 0, pcols = 0;  // padded to multiples of 32
  // batch x prows x pcols, row-major; every value is exactly representable
  // in `format` (block-float rows already share their exponent).
  std::vector<float> data;

  float& at(int64_t b, int64_t r, int64_t c) { return data[(b * prows + r) * pcols + c]; }
  float at(int64_t b, int64_t r, int64_t c) const { return data[(b * prows + r) * pcols + c]; }
  const float* matrix(int64_t b) const { return data.data() + b * prows * pcols; }
  float* matrix(int64_t b) { return data.data() + b * prows * pcols; }
};

// A zero-filled tile tensor of the given logical shape (padding is zero).
TileTensor make_tile_tensor(const Shape& shape, DataFormat format);

// Host conversion (ttnn.from_torch(..., layout=TILE_LAYOUT, dtype=format)):
// values (row-major, logical shape) are padded with pad_value, then quantised
// to format with tt-metal's host rules, block-float rows following face rows.
TileTensor to_tile_layout(const float* values, const Shape& shape, DataFormat format,
                          float pad_value = 0.0f);
TileTensor to_tile_layout(const Tensor& t, DataFormat format, float pad_value = 0.0f);
// The same into `out`, reusing its storage: a caller converting one large
// input after another (a decode step's KV cache) then writes into pages it
// has already touched rather than fresh ones, which the kernel zeroes first
// at a cost above the conversion's own. Storage more than twice the size
// needed is released first.
void to_tile_layout(const float* values, const Shape& shape, DataFormat format, TileTensor& out,
                    float pad_value = 0.0f);

// Back to a row-major logical array (ttnn.to_torch): padding dropped.
std::vector<float> to_row_major(const TileTensor& t);
// The same into out (batch * rows * cols floats), e.g. a caller's array.
void to_row_major(const TileTensor& t, float* out);
Tensor to_tensor(const TileTensor& t);  // float32 Tensor of the logical shape

// Re-quantises in place with the host rules (e.g. after a host-side edit).
void requantize_host(TileTensor& t);

// Device element order: for each batch, tile row, tile column, the four
// faces in order, each face's 16 rows of 16 values. Length batch*prows*pcols.
std::vector<float> tilize(const TileTensor& t);
// Inverse of tilize for a tensor of the given shape and format.
TileTensor untilize(const std::vector<float>& tiled, const Shape& shape, DataFormat format);

}  // namespace mha::ttsim
