#pragma once
// ttnn.transformer.scaled_dot_product_attention_decode (Flash-Decode) and its
// paged variant, as tt-metal's sdpa_decode program runs it: the K/V length up
// to cur_pos is cut into k_chunk_size chunks, the chunks are dealt to the
// cores of one kv head (reversed: core 0, the reducer, gets the last ones),
// each core runs the online softmax over its chunks, and the cores' partial
// (max, sum, output) are merged along the kernel's reduction tree. Every
// intermediate is a bfloat16 circular buffer (the program factory's im_df and
// stats_df). docs/TTSIM.md "SDPA decode" lists the sources and assumptions.
#include <cstdint>
#include <optional>
#include <vector>

#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"
#include "util/fields.h"

namespace mha::ttsim {

// TT-NN's SDPAProgramConfig and compute kernel config for the op.
struct SdpaDecodeConfig {
  int64_t k_chunk_size = 0;            // 0: TT-NN's default (see sdpa_decode_k_chunk_size)
  bool is_causal = true;               // false (tt_metal latest): attend the whole cache, no cur_pos
  bool exp_approx_mode = true;         // program config; TT-NN's default true
  int grid_x = 8, grid_y = 8;          // compute_with_storage_grid_size
  int max_cores_per_head_batch = 0;    // 0: the whole grid
  std::optional<float> scale;          // unset: 1/sqrt(dh)
  // sliding_window_size (0: none): user b attends positions
  // [cur_pos - W + 1, cur_pos]; the chunk range starts at the window's chunk
  // and that chunk gets a mask below the window (rt_args_common.hpp).
  int64_t sliding_window_size = 0;
  // attention_sink: one logit per q head (empty: none), unscaled, as bf16;
  // merged at the root after the reduction tree, before 1/sum.
  std::vector<float> attention_sink;
  // The compute kernel config and the output's dtype; sdpa_decode's
  // defaults: HiFi2, approx on, fp32 Dst off.
  ComputeConfig compute;
  // Multi-head latent attention (TT-NN's use_mla with head_dim_v, set by
  // flash_multi_latent_attention_decode, whose attributes key it; not an
  // option of sdpa-decode): V is K's first head_dim_v columns, read from
  // K's rows (the caller passes K as V), and the output is head_dim_v wide.
  // 0: V is its own tensor of K's shape.
  int64_t head_dim_v = 0;

  // The fields (util/fields.h): the op's own --option keys, the grid the
  // backend options give, then the compute config. They key the program
  // and fill the --json report.
  template <class V>
  void fields(V& v) {
    v("k_chunk_size", k_chunk_size, "0 (default) or a power of 2, multiple of 32");
    v("exp_approx_mode", exp_approx_mode, "true (default) or false: the statistics' exp");
    v("is_causal", is_causal,
      "true (default): positions 0..cur_pos; false: the whole cache, an optional MASK (tt_metal latest)");
    v("max_cores_per_head_batch", max_cores_per_head_batch, "cores per head at most (default: the grid)");
    v("scale", scale, "the softmax scale (default 1/sqrt(dh))");
    v("sliding_window_size", sliding_window_size,
      "positions per user's window, [cur_pos-W+1, cur_pos] (default 0: none)");
    v("attention_sink", attention_sink,
      "[s0, s1, ...]: one logit per q head, unscaled, held as bf16 (default none)");
    v("grid_x", grid_x, "compute_with_storage_grid_size x", fields::kDerived);
    v("grid_y", grid_y, "compute_with_storage_grid_size y", fields::kDerived);
    compute.fields(v, fields::kDerived);
  }
};

// The k_chunk_size the op runs with: the config's, else for the non-paged op
// the largest power of two dividing S, at most 512 (sdpa_decode.cpp
// get_chunk_size); for the paged op (k_chunk_size 0) the kernel's dynamic
// size: the tile count up to cur_pos rounded up to a power of two, at most
// 8 tiles (4 with an fp32 Dst), times 32.
int64_t sdpa_decode_k_chunk_size(const SdpaDecodeConfig& cfg, int64_t S, bool paged, int64_t cur_pos);

// The kernel's position for cur_pos p when a paged cache's blocks hold
// block_size < 32 rows (block padding: each block fills a tile):
// (p / block_size) * 32 + p % block_size; p itself for any other block size.
int64_t sdpa_decode_padded_position(int64_t p, int64_t block_size);

// How the program factory lays one batch out on the grid.
struct SdpaDecodeGrid {
  int64_t cores_per_batch = 0, cores_per_head = 0, heads_per_core = 0;
};
SdpaDecodeGrid sdpa_decode_grid(const SdpaDecodeConfig& cfg, int64_t batch, int64_t nkv);

// q [1, b, nh, dh]; k, v [b, nkv, S, dh], or with page_table [blocks, nkv,
// block_size, dh] and b rows of block ids; cur_pos: one position per user
// (attention over positions 0..cur_pos). Returns [1, b, nh, dv] (dv = dh,
// or cfg.head_dim_v) in
// cfg.output. ex.isa Scalar runs the lane models (the oracle); other
// instruction sets run the matmuls on the vector kernels (bit-identical);
// the cores of all heads run as tasks on ex's pool.
// Throws InputError on shapes, positions, chunk sizes or grids TT-NN refuses.
TileTensor tt_sdpa_decode(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg, const Exec& ex = Exec{});
// The same with an attention mask [b, 1, nh, S] (nullptr: none) added to
// the scores of every chunk: tt_metal latest's non-causal op (cur_pos then
// empty). At latest a paged cache's blocks may also be under 32 rows (block
// padding).
TileTensor tt_sdpa_decode(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg, const Exec& ex = Exec{});

}  // namespace mha::ttsim
