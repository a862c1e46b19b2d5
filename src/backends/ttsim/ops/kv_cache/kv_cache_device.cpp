#include "backends/ttsim/ops/kv_cache/kv_cache.h"

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
