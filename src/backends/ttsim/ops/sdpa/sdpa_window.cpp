// The sliding window's tile geometry at tt_metal latest, read (never
// copied) from tt-metal: sliding_window_geometry.hpp (the loop bounds the
// reader and sdpa_standard_v2 share), the streaming compute header's
// stamp_sliding_leading_edge / stamp_sliding_trailing_edge and the
// writer's fill_sliding_window_edge_tiles (the edge tiles' diagonals), and
// generate_causal_sliding_window_mask (the fp32-Dst program's mask).
#include "backends/ttsim/ops/sdpa/sdpa_window.h"

#include <algorithm>
#include <string>

namespace mha::ttsim {

namespace {

constexpr int64_t kT = 32;  // TILE_HEIGHT

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The reach of one edge in whole tiles (base) and its remainder within a
// tile: causal, the leading edge W back; non-causal, W/2 either way.
struct Edge {
  int64_t base, rem;
};
Edge edge_of(const SdpaConfig& cfg) {
  const int64_t reach = cfg.is_causal ? cfg.sliding_window_size : cfg.sliding_window_size / 2;
  return {reach / kT, reach % kT};
}

}  // namespace

SdpaKRange sdpa_streaming_k_range(const SdpaConfig& cfg, int64_t q_start_tile, int64_t q_tiles, int64_t k_tiles,
                                  int64_t k_chunks) {
  SdpaKRange r{0, k_chunks};
  if (cfg.is_causal) r.end = std::min(k_chunks, ceil_div(q_start_tile + q_tiles, k_tiles));
  const int64_t W = cfg.sliding_window_size;
  if (W <= 0) return r;
  // Loop bounds round the reach up to whole tiles (causal: W - 1 keys back).
  const int64_t left = ceil_div(cfg.is_causal ? W - 1 : W / 2, kT), right = cfg.is_causal ? 0 : ceil_div(W / 2, kT);
  if (q_start_tile > left) r.begin = (q_start_tile - left) / k_tiles;
  if (!cfg.is_causal) r.end = std::min(k_chunks, ceil_div(q_start_tile + q_tiles + right, k_tiles));
  return r;
}

bool sdpa_window_stamps_tile(const SdpaConfig& cfg, int64_t qt, int64_t kt) {
  if (cfg.sliding_window_size <= 0) return false;
  const Edge e = edge_of(cfg);
  if (kt <= qt - e.base) return true;  // the -inf run and the leading edge tile(s)
  return !cfg.is_causal && kt >= qt + e.base;  // the trailing edge tile(s) and the -inf run after
}

// The stamps the window puts on (r, c) of key tile kt; the edge tiles are
// fill_diagonal_edge_tile_bf16's: a leading tile is -inf left of column
// r + offset, a trailing one right of it.
bool sdpa_window_stamp_masks(const SdpaConfig& cfg, int64_t qt, int64_t kt, int64_t r, int64_t c) {
  if (!sdpa_window_stamps_tile(cfg, qt, kt)) return false;
  const Edge e = edge_of(cfg);
  const int64_t lead = qt - e.base;  // the leading edge's tile
  const bool split = e.rem != 0;     // the edge falls inside a tile: two tiles carry it
  // Causal offsets count from the key after q - W (the window holds W keys).
  const int64_t one = cfg.is_causal ? 1 : 0;
  if (kt < lead - (split ? 1 : 0)) return true;
  if (split && kt == lead - 1) return c < r + one + kT - e.rem;
  if (kt == lead && c < r + one - e.rem) return true;
  if (cfg.is_causal) return false;
  const int64_t trail = qt + e.base;
  if (kt > trail + (split ? 1 : 0)) return true;
  if (kt == trail) return c > r + e.rem;
  return split && kt == trail + 1 && c > r + e.rem - kT;
}

bool sdpa_window_generated_masks(int64_t W, int64_t qt, int64_t kt, int64_t r, int64_t c) {
  // The union of the q tile's row windows, [first start, last end).
  const int64_t qs = qt * kT, qe = qs + kT - 1, ks = kt * kT, ke = ks + kT - 1;
  const int64_t min_start = std::max<int64_t>(0, qs - W + 1), max_start = std::max<int64_t>(0, qe - W + 1);
  if (ke < min_start || ks >= qe + 1) return true;      // wholly outside: the -inf tile
  if (ks >= min_start && ke < qs + 1) return false;     // inside the first row's window: the zero tile
  const int64_t leading = qs - ks, trailing = ke - max_start;  // fill_custom_diagonal_tile_bfp4's offsets
  return (leading < kT && c > r + leading) || (trailing < kT && c < r - trailing);
}

std::string sdpa_window_generated_note(const SdpaConfig& cfg) {
  const int64_t W = cfg.sliding_window_size;
  if (W <= kT || W % kT == 0) return "";
  return "sliding_window_size=" + std::to_string(W) +
         " at tt_metal latest with fp32_dest_acc_en: the writer's window mask passes a key tile whole when it "
         "lies in the window of the q tile's first row, so a query sees up to 31 keys before its window "
         "(generate_causal_sliding_window_mask)";
}

}  // namespace mha::ttsim
