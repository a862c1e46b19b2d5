#include "backends/ttsim/ops/kv_cache/kv_cache.h"

#include <utility>

#include "util/error.h"

namespace mha::ttsim {

namespace {

// The input's and the cache's tiles double-buffered, plus the row being
// re-packed through Dst.
int64_t cache_cb(const TileTensor& cache, const TileTensor& x) {
  return 2 * (tile_bytes(cache.format) + tile_bytes(x.format)) + tile_bytes(DataFormat::Float32);
}

// The cache is written in place: no output buffer of its own.
void launch(TtDevice& dev, const std::string& op, const std::string& key, const TileTensor& cache,
            const TileTensor& x) {
  check_cb_budget(dev, op, cache_cb(cache, x));
  dev.program(op, key, {&cache, &x});
}

}  // namespace

void run_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t update_idx, int64_t batch_offset,
                      const CacheAttributes& at) {
  const std::string op = "ttnn.update_cache";
  TtDevice::OpTimer timer(dev, op);
  launch(dev, op, program_key(at), cache, x);
  tt_update_cache(cache, x, update_idx, batch_offset, at.write);
}

void run_paged_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos,
                            const std::vector<std::vector<int64_t>>* page_table, const CacheAttributes& at) {
  const std::string op = "ttnn.experimental.paged_update_cache";
  TtDevice::OpTimer timer(dev, op);
  launch(dev, op, program_key(at), cache, x);
  tt_paged_update_cache(cache, x, cur_pos, page_table, at.write);
}

void run_paged_fused_update_cache(TtDevice& dev, TileTensor& cache1, const TileTensor& x1, TileTensor& cache2,
                                  const TileTensor& x2, const std::vector<int64_t>& cur_pos,
                                  const std::vector<std::vector<int64_t>>* page_table, const CacheAttributes& at) {
  const std::string op = "ttnn.experimental.paged_fused_update_cache";
  if (cache1.shape != cache2.shape || cache1.format != cache2.format)
    throw InputError(op + ": cache2 is " + shape_str(cache2.shape) + " " + format_name(cache2.format) + ", cache1 " +
                     shape_str(cache1.shape) + " " + format_name(cache1.format) +
                     " (the program takes cache1's shape and dtype for both)");
  if (x1.shape != x2.shape || x1.format != x2.format)
    throw InputError(op + ": input2 is " + shape_str(x2.shape) + " " + format_name(x2.format) + ", input1 " +
                     shape_str(x1.shape) + " " + format_name(x1.format) +
                     " (the program takes input1's shape and dtype for both)");
  TtDevice::OpTimer timer(dev, op);
  check_cb_budget(dev, op, cache_cb(cache1, x1));
  dev.program(op, program_key(at), {&cache1, &x1, &cache2, &x2});
  // Both caches are checked before either is written: no half-written output.
  TileTensor out1 = cache1, out2 = cache2;
  tt_paged_update_cache(out1, x1, cur_pos, page_table, at.write);
  tt_paged_update_cache(out2, x2, cur_pos, page_table, at.write);
  cache1 = std::move(out1);
  cache2 = std::move(out2);
}

void run_paged_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x,
                          const std::vector<std::vector<int64_t>>& page_table, int64_t batch_idx) {
  const std::string op = "ttnn.experimental.paged_fill_cache";
  TtDevice::OpTimer timer(dev, op);
  launch(dev, op, "", cache, x);
  tt_paged_fill_cache(cache, x, page_table, batch_idx);
}

void run_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t batch_idx, int64_t update_idx) {
  const std::string op = "ttnn.fill_cache";
  TtDevice::OpTimer timer(dev, op);
  launch(dev, op, "", cache, x);
  tt_fill_cache(cache, x, batch_idx, update_idx, CacheWriteConfig{});
}

}  // namespace mha::ttsim
