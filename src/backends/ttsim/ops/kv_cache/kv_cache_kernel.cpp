#include "backends/ttsim/ops/kv_cache/kv_cache_kernel.h"

#include <algorithm>
#include <string>

#include "ttsim/matrix_unit.h"
#include "ttsim/packer.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// [d0, d1, d2, d3] of a 4-D tile tensor, or an InputError naming `what`.
void check_4d(const TileTensor& t, const char* what) {
  if (t.shape.size() != 4)
    throw InputError(std::string(what) + ": expected 4 dims, found " + shape_str(t.shape));
}

// Row `r` of matrix `m` of `t` (padded width).
float* row_ptr(TileTensor& t, int64_t m, int64_t r) { return t.matrix(m) + r * t.pcols; }
const float* row_ptr(const TileTensor& t, int64_t m, int64_t r) { return t.matrix(m) + r * t.pcols; }

// The untilize -> overwrite -> tilize round trip of update_cache's compute
// kernel on the 32-row tile block of cache matrix `m` that holds row `row`:
// every value is unpacked to Src, packed to the intermediate format
// (pack_untilize), the row is replaced by `src` (the input, untilized the
// same way), then unpacked again and packed to the cache format (tilize).
void repack_tile_rows(TileTensor& cache, int64_t m, int64_t row, const float* src, DataFormat src_format,
                      const CacheWriteConfig& cfg) {
  const bool fp32 = cfg.fp32_dest_acc_en;
  const DataFormat interm = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
  const int64_t W = cache.pcols, r0 = row / kTile * kTile;
  std::vector<float> buf(static_cast<size_t>(W));
  for (int64_t r = r0; r < r0 + kTile; ++r) {
    float* dst = row_ptr(cache, m, r);
    const bool replaced = r == row;
    const float* in = replaced ? src : dst;
    const DataFormat in_format = replaced ? src_format : cache.format;
    for (int64_t c = 0; c < W; ++c) buf[c] = unpack_to_src(in[c], in_format, fp32);
    pack_from_dst(buf.data(), buf.data(), W, interm, fp32, false);  // pack_untilize: no compute config flag
    for (int64_t c = 0; c < W; ++c) buf[c] = unpack_to_src(buf[c], interm, fp32);
    pack_from_dst(buf.data(), dst, W, cache.format, fp32, cfg.bfp8_pack_precise);
  }
}

void check_position(int64_t pos, int64_t limit, const std::string& what) {
  if (pos < 0 || pos >= limit)
    throw InputError(what + ": expected a position in [0, " + std::to_string(limit) + "), found " +
                     std::to_string(pos));
}

}  // namespace

void tt_fill_cache(TileTensor& cache, const TileTensor& x, int64_t batch_idx, int64_t update_idx,
                   const CacheWriteConfig& cfg) {
  check_4d(cache, "fill_cache cache");
  check_4d(x, "fill_cache input");
  const Shape& cs = cache.shape;
  const Shape& xs = x.shape;
  if (xs[0] != 1 || xs[1] != cs[1] || xs[3] != cs[3] || update_idx + xs[2] > cs[2])
    throw InputError("fill_cache: input " + shape_str(xs) + " at update_idx " + std::to_string(update_idx) +
                     " does not fit cache " + shape_str(cs) +
                     " (expected [1, nkv, s, dh] with the cache's nkv and dh, update_idx + s <= S)");
  check_position(batch_idx, cs[0], "fill_cache batch_idx");
  if (update_idx < 0 || update_idx % kTile != 0)
    throw InputError("fill_cache: update_idx " + std::to_string(update_idx) + " must be a multiple of 32 (whole tiles)");
  if (x.format != cache.format)
    throw InputError(std::string("fill_cache: input dtype ") + format_name(x.format) + " differs from the cache's " +
                     format_name(cache.format) + " (TT-NN copies whole tiles: expected the same dtype)");
  (void)cfg;  // a tile copy: no compute kernel, the tiles keep their bits
  const int64_t rows = std::min(x.prows, cache.prows - update_idx);
  for (int64_t h = 0; h < cs[1]; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = row_ptr(x, h, r);
      float* out = row_ptr(cache, batch_idx * cs[1] + h, update_idx + r);
      std::copy(in, in + cache.pcols, out);
    }
}

void tt_paged_fill_cache(TileTensor& cache, const TileTensor& x, const std::vector<std::vector<int64_t>>& page_table,
                         int64_t batch_idx) {
  check_4d(cache, "paged_fill_cache cache");
  check_4d(x, "paged_fill_cache input");
  const Shape& cs = cache.shape;
  const Shape& xs = x.shape;
  const int64_t block = cs[2];
  if (block % kTile != 0)
    throw InputError("paged_fill_cache: block_size " + std::to_string(block) + " is not a multiple of 32");
  check_position(batch_idx, static_cast<int64_t>(page_table.size()), "paged_fill_cache batch_idx (page table rows)");
  const std::vector<int64_t>& pages = page_table[static_cast<size_t>(batch_idx)];
  if (xs[0] != 1 || xs[1] != cs[1] || xs[3] != cs[3] || x.prows > block * static_cast<int64_t>(pages.size()))
    throw InputError("paged_fill_cache: input " + shape_str(xs) + " does not fit cache " + shape_str(cs) + " through " +
                     std::to_string(pages.size()) + " pages (expected [1, nkv, s, dh] with the cache's nkv and dh, "
                     "s <= block_size * pages)");
  if (x.format != cache.format)
    throw InputError(std::string("paged_fill_cache: input dtype ") + format_name(x.format) + " differs from the cache's " +
                     format_name(cache.format) + " (TT-NN copies raw tiles: cast to the cache's dtype first)");
  for (int64_t p = 0; p < x.prows; p += block)
    check_position(pages[static_cast<size_t>(p / block)], cs[0], "paged_fill_cache page_table block id");
  for (int64_t h = 0; h < cs[1]; ++h)
    for (int64_t r = 0; r < x.prows; ++r) {
      const float* in = row_ptr(x, h, r);
      std::copy(in, in + cache.pcols, row_ptr(cache, pages[static_cast<size_t>(r / block)] * cs[1] + h, r % block));
    }
}

void tt_update_cache(TileTensor& cache, const TileTensor& x, int64_t update_idx, int64_t batch_offset,
                     const CacheWriteConfig& cfg) {
  check_4d(cache, "update_cache cache");
  check_4d(x, "update_cache input");
  const Shape& cs = cache.shape;
  const Shape& xs = x.shape;
  if (xs[0] != 1 || xs[1] != cs[1] || xs[3] != cs[3])
    throw InputError("update_cache: input " + shape_str(xs) + " does not fit cache " + shape_str(cs) +
                     " (expected [1, nkv, users, dh] with the cache's nkv and dh)");
  check_position(update_idx, cs[2], "update_cache update_idx");
  // Cache user u takes the input's row batch_offset + u; a row past the
  // input's users would be its tile's zero padding, which TT-NN's users
  // never mean to write: refused.
  if (batch_offset < 0 || batch_offset + cs[0] > xs[2])
    throw InputError("update_cache: batch_offset " + std::to_string(batch_offset) + " + " + std::to_string(cs[0]) +
                     " cache users passes the input's " + std::to_string(xs[2]) +
                     " users (expected batch_offset + the cache's batch <= the input's users)");
  for (int64_t h = 0; h < cs[1]; ++h)
    for (int64_t u = 0; u < cs[0]; ++u)
      repack_tile_rows(cache, u * cs[1] + h, update_idx, row_ptr(x, h, batch_offset + u), x.format, cfg);
}

void tt_paged_update_cache(TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos,
                           const std::vector<std::vector<int64_t>>* page_table, const CacheWriteConfig& cfg) {
  check_4d(cache, "paged_update_cache cache");
  check_4d(x, "paged_update_cache input");
  const Shape& cs = cache.shape;
  const Shape& xs = x.shape;
  const int64_t users = xs[1], nkv = cs[1];
  if (xs[0] != 1 || xs[2] < nkv || xs[3] != cs[3])
    throw InputError("paged_update_cache: input " + shape_str(xs) + " does not fit cache " + shape_str(cs) +
                     " (expected [1, b, nh >= nkv, dh] with the cache's dh)");
  if (static_cast<int64_t>(cur_pos.size()) != users)
    throw InputError("paged_update_cache: expected one position per user (" + std::to_string(users) + "), found " +
                     std::to_string(cur_pos.size()));
  if (!page_table && users > cs[0])
    throw InputError("paged_update_cache: input has " + std::to_string(users) + " users, the cache " +
                     std::to_string(cs[0]) + " (expected at most the cache's batch)");
  if (page_table && static_cast<int64_t>(page_table->size()) != users)
    throw InputError("paged_update_cache: page table has " + std::to_string(page_table->size()) +
                     " rows, expected one per user (" + std::to_string(users) + ")");
  for (int64_t u = 0; u < users; ++u) {
    const int64_t p = cur_pos[u];
    if (p == -1) continue;
    int64_t matrix_batch = u, row = p;
    if (page_table) {
      const std::vector<int64_t>& pages = (*page_table)[u];
      const int64_t block = cs[2];
      check_position(p, block * static_cast<int64_t>(pages.size()), "paged_update_cache cur_pos[" + std::to_string(u) + "]");
      matrix_batch = pages[p / block];
      check_position(matrix_batch, cs[0], "page_table[" + std::to_string(u) + "]");
      row = p % block;
    } else {
      check_position(p, cs[2], "paged_update_cache cur_pos[" + std::to_string(u) + "]");
    }
    for (int64_t h = 0; h < nkv; ++h)
      repack_tile_rows(cache, matrix_batch * nkv + h, row, row_ptr(x, u, h), x.format, cfg);
  }
}

}  // namespace mha::ttsim
