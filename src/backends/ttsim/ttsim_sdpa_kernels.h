#pragma once
// The SDPA pipeline's ops (ttsim_sdpa.h) as device calls: each registers its
// program with the device (program cache, keyed on its attributes and
// inputs), checks memory, times itself, then runs the numeric kernel of
// src/ttsim. Thin adapters over the kernels' own signatures.
#include <cstdint>
#include <vector>

#include "backends/ttsim/ttsim_ops.h"
#include "ttsim/kblock.h"

namespace mha::ttsim {

// ttnn.linear x [.., M, K] @ w [K, N] with an explicit program config's K
// blocking (tt_transformers passes XQKV_PREFILL_PROGCFG: in0_block_w = 1),
// or TT-NN's own program selection when `blk` is null.
TileTensor k_linear(TtDevice& dev, const char* op, const TileTensor& x, const TileTensor& w, const ComputeConfig& cfg,
                    Grid grid, const MatmulBlocking* blk);

// ttnn.typecast: x repacked to `out` through a 16-bit Dst (exact for a
// format at least as wide as x's values).
TileTensor k_typecast(TtDevice& dev, const TileTensor& x, DataFormat out);

// ttnn.experimental.rotary_embedding_llama (ttsim/rotary_llama.h): x
// [1, n, s, dh] with cos / sin [1, 1, s, dh] (prefill), or x [1, b, nh, dh]
// with cos / sin [1, b, 1, dh] (decode); output in cfg.output.
TileTensor k_rotary_llama(TtDevice& dev, const TileTensor& x, const TileTensor& cos, const TileTensor& sin,
                          const TileTensor& trans, const ComputeConfig& cfg, bool decode_mode);

// ttnn.fill_cache(cache [b, nkv, S, dh], x [1, nkv, s, dh], batch_idx).
// The op takes no compute config (16-bit Dst, TT-NN's default packing).
void k_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t batch_idx);

// ttnn.experimental.paged_update_cache(cache, x [1, b, nkv, dh], cur_pos)
// without a page table; the model passes no compute config (the defaults).
void k_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos);

// ttnn.transformer.scaled_dot_product_attention(q [1, H, s, dh], k, v
// [1, Hkv, s, dh], is_causal=True, scale, sliding_window_size = window (0:
// none)) -> [1, H, s, dh] in cfg.output.
TileTensor k_sdpa(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v, float scale,
                  int64_t chunk, bool exp_approx, int64_t window, const ComputeConfig& cfg);

// ttnn.transformer.scaled_dot_product_attention_decode(q [1, b, H, dh],
// cache_k, cache_v [b, Hkv, S, dh], cur_pos, scale, sliding_window_size =
// window (0: none)) -> [1, b, H, dh], with SDPA_DECODE_PROGCFG: `grid`,
// k_chunk_size, exp_approx_mode False.
TileTensor k_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                         const std::vector<int64_t>& cur_pos, float scale, Grid grid, int64_t k_chunk,
                         int64_t window, const ComputeConfig& cfg);

}  // namespace mha::ttsim
