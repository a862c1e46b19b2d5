#pragma once
// ttnn.update_cache, ttnn.experimental.paged_update_cache and
// ttnn.fill_cache on the emulated device: rows written into a cache in
// place (kv_cache_kernel.h). Position arguments are runtime arguments.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/kv_cache/kv_cache_kernel.h"

namespace mha::ttsim {

struct CacheAttributes {
  CacheWriteConfig write;  // the compute config's Dst mode and packing
  template <class V>
  void fields(V& v) {
    v("fp32_dest_acc_en", write.fp32_dest_acc_en, "a 32-bit Dst", fields::kDerived);
    v("bfp8_pack_precise", write.bfp8_pack_precise, "the packer's source for a block-float cache", fields::kDerived);
  }
};

// ttnn.update_cache(cache, x [1, nkv, users, dh], update_idx, batch_offset).
void run_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t update_idx, int64_t batch_offset,
                      const CacheAttributes& attrs);
// ttnn.experimental.paged_update_cache(cache, x [1, b, nh, dh], cur_pos
// [, page_table]); -1 skips a user.
void run_paged_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos,
                            const std::vector<std::vector<int64_t>>* page_table, const CacheAttributes& attrs);
// ttnn.experimental.paged_fused_update_cache(cache1, x1, cache2, x2, cur_pos
// [, page_table]): one program writing x1 into cache1 and x2 into cache2
// (the K and V caches), each as paged_update_cache writes it: the factory
// (paged_tiled_fused_update_cache_program_factory.cpp) runs the same
// untilize / overwrite / tilize kernel on both, with cache1's and input1's
// formats for both pairs, so the caches (and the inputs) must match in
// shape and dtype.
void run_paged_fused_update_cache(TtDevice& dev, TileTensor& cache1, const TileTensor& x1, TileTensor& cache2,
                                  const TileTensor& x2, const std::vector<int64_t>& cur_pos,
                                  const std::vector<std::vector<int64_t>>* page_table, const CacheAttributes& attrs);
// ttnn.experimental.paged_fill_cache(cache [blocks, nkv, block_size, dh],
// x [1, nkv, s, dh], page_table, batch_idx): a tile copy through the table.
void run_paged_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x,
                          const std::vector<std::vector<int64_t>>& page_table, int64_t batch_idx);
// ttnn.fill_cache(cache [b, nkv, S, dh], x [1, nkv, s, dh], batch_idx)
// from row update_idx (a tile copy: no compute config).
void run_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t batch_idx, int64_t update_idx);

}  // namespace mha::ttsim
