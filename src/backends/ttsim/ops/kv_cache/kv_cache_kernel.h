#pragma once
// TT-NN's KV cache ops on tile tensors: the cache keeps its dtype (bfloat16,
// bfloat8_b, bfloat4_b, float32) and every write goes through the packer, as
// tt-metal's kv_cache kernels do (ttnn/cpp/ttnn/operations/kv_cache/device/
// kernels/compute/update_cache.cpp; paged_update_cache in
// operations/experimental/paged_cache). docs/TTSIM.md "KV cache".
//
// update_cache's compute kernel untilizes the cache tile that holds the row
// (pack_untilize into an intermediate buffer: Float16_b, or Float32 when
// fp32_dest_acc_en), lets the writer overwrite the
// row, then tilizes the whole block back into the cache format. So the whole
// 32-row tile is re-packed: the new row's face rows get their shared exponent
// from the packer (Bfp8_b pack source), the other rows survive unchanged
// whenever they are exact in the intermediate format (always, for block-float
// and bf16 caches; a float32 cache goes through the unpacker's TF32 or
// bf16 cut, and with a bf16 intermediate through bf16).
#include <cstdint>
#include <vector>

#include "ttsim/tile.h"

namespace mha::ttsim {

struct CacheWriteConfig {
  bool fp32_dest_acc_en = false;
  bool bfp8_pack_precise = false;
};

// ttnn.fill_cache(cache, x, batch_idx, update_idx): cache [b, nkv, S, dh],
// x [1, nkv, s, dh] of the cache's dtype: cache[batch_idx, :, update_idx :
// update_idx + s, :] = x, whole tiles copied (no compute kernel: the bits
// move unchanged). update_idx a multiple of 32. InputError on shapes, dtypes
// or indices.
void tt_fill_cache(TileTensor& cache, const TileTensor& x, int64_t batch_idx, int64_t update_idx,
                   const CacheWriteConfig& cfg);

// ttnn.experimental.paged_fill_cache(cache, x, page_table, batch_idx): cache
// [blocks, nkv, block_size, dh] (block_size a multiple of 32), x [1, nkv, s,
// dh] of the cache's dtype (float32 too): x's tile rows (its padding
// included) are copied to user batch_idx's pages, row p to block
// page_table[batch_idx][p / block_size], row p % block_size (a raw tile
// copy, as the kernel's reader and writer move them). InputError on shapes,
// dtypes, indices or a page table too short for s.
void tt_paged_fill_cache(TileTensor& cache, const TileTensor& x, const std::vector<std::vector<int64_t>>& page_table,
                         int64_t batch_idx);

// ttnn.update_cache(cache, x, update_idx, batch_offset): cache [b, nkv, S, dh],
// x [1, nkv, users, dh] (users padded to a tile of 32 on the device): every
// cache user u < b takes input row batch_offset + u, cache[u, h, update_idx,
// :] = x[0, h, batch_offset + u, :], re-packing the tile as the kernel does.
void tt_update_cache(TileTensor& cache, const TileTensor& x, int64_t update_idx, int64_t batch_offset,
                     const CacheWriteConfig& cfg);

// ttnn.experimental.paged_update_cache(cache, x, update_idxs=cur_pos,
// page_table): x [1, b, nh, dh] with nh >= nkv (the first nkv rows are the
// heads); cache [b, nkv, S, dh] without a page table, or [blocks, nkv,
// block_size, dh] with page_table (b rows of block ids): position p of user
// u lives in block page_table[u][p / block_size], row p % block_size. A
// position of -1 skips the user (as TT-NN does).
void tt_paged_update_cache(TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos,
                           const std::vector<std::vector<int64_t>>* page_table, const CacheWriteConfig& cfg);

}  // namespace mha::ttsim
