#pragma once
// ttnn.transformer.scaled_dot_product_attention_decode (and the paged
// variant) on the emulated device. Its attributes are SdpaDecodeConfig
// (sdpa_decode_kernel.h: program config, scale, window, sink, grid, the
// compute config embedded, one field list); cur_pos and the page table are
// runtime arguments (they do not key the program).
#include <string>
#include <vector>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"

namespace mha::ttsim {

// The program name: paged_scaled_dot_product_attention_decode with a page
// table; (paged_)flash_multi_latent_attention_decode with use_mla.
const char* sdpa_decode_program(bool paged, bool mla = false);

// Circular buffers per core as the program factory sizes them: the Q
// tiles, K and V chunks double-buffered, the qk block, the output
// accumulator and its partials, the statistics.
int64_t sdpa_decode_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, int64_t k_chunk,
                             const SdpaDecodeConfig& cfg);

// The frame (device_op.h), then the kernel (which checks shapes, positions
// and the grid as TT-NN does): [1, b, nh, dh] in cfg.compute.output.
// With cfg.head_dim_v (ttnn.transformer.flash_multi_latent_attention_decode
// and its paged variant: the same device operation with use_mla) v is k,
// the latent cache [c | k_rope] whose first head_dim_v columns are V, and
// the output [1, b, nh, head_dim_v].
TileTensor run_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                           const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                           const SdpaDecodeConfig& cfg);
// The same with an attention mask (nullptr: none; tt_metal latest, is_causal false).
TileTensor run_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                           const TileTensor* mask, const std::vector<int64_t>& cur_pos,
                           const std::vector<std::vector<int64_t>>* page_table, const SdpaDecodeConfig& cfg);

}  // namespace mha::ttsim
