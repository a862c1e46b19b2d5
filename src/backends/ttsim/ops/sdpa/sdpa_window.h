#pragma once
// sliding_window_size at tt_metal latest (15a15bf5; docs/TTSIM.md "The
// sliding window at latest"): which key chunks each program reads and
// which mask it adds, as tile geometry. The window itself is TT-NN's: a
// causal query at q sees keys [q - W + 1, q], a non-causal one
// [q - W/2, q + W/2]. All positions here are tiles of 32 (a q tile's rows
// are its 32 queries, a k tile's columns its 32 keys).
#include <cstdint>

#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"

namespace mha::ttsim {

// The key chunks [begin, end) the streaming kernel reads for the q chunk of
// q_tiles tiles starting at q_start_tile (the chunk offset included): up to
// the chunk's last diagonal when causal, else all k_chunks; with a window,
// narrowed to it (SlidingWindowLoopGeometry: the reader and the compute
// kernel both start at (q_start_tile - L) / k_tiles and, non-causal, stop
// after q_start_tile + q_tiles + R, L and R the window's reach in whole
// tiles rounded up). Chunks wholly outside are never read.
struct SdpaKRange {
  int64_t begin = 0, end = 0;
};
SdpaKRange sdpa_streaming_k_range(const SdpaConfig& cfg, int64_t q_start_tile, int64_t q_tiles, int64_t k_tiles,
                                  int64_t k_chunks);

// The streaming kernel's window stamp on key tile kt of q tile qt
// (apply_lightweight_mask_streaming with the writer's five-tile palette):
// whether any window tile lands there (-inf tiles before the leading edge
// and after a non-causal trailing edge, the edge tiles on them), and for
// row r (0..31) of the q tile and column c of the key tile whether the
// stamps add -inf. The causal diagonal is stamped apart, as without a
// window.
bool sdpa_window_stamps_tile(const SdpaConfig& cfg, int64_t qt, int64_t kt);
bool sdpa_window_stamp_masks(const SdpaConfig& cfg, int64_t qt, int64_t kt, int64_t r, int64_t c);

// The fp32-Dst program's window mask (the writer's Bfp4_b mask chunk,
// generate_causal_sliding_window_mask, causal only): whether key tile kt's
// column c is -inf for row r of q tile qt. A tile counts as inside the
// window when it lies within the window of the tile's first row, so for W
// above 32 and not a multiple of 32 the later rows see up to 31 keys before
// their window (sdpa_window_generated_note).
bool sdpa_window_generated_masks(int64_t W, int64_t qt, int64_t kt, int64_t r, int64_t c);
// The one-line note on that mask, or "" when the window is exact.
std::string sdpa_window_generated_note(const SdpaConfig& cfg);

}  // namespace mha::ttsim
