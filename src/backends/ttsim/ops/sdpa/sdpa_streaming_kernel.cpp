// SDPA prefill by the streaming kernel: the program's shape (subblocking,
// what it takes) and the fast path over (batch x head, q chunk) tasks.
#include <array>
#include <utility>

#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "backends/ttsim/ops/sdpa/sdpa_window.h"
#include "backends/ttsim/ttsim_device.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// sdpa_subblock_utils.hpp (37d02a42) determine_largest_subblock_size: the
// first (h, w) of this list with h * w <= the Dst's 8 tiles that divides
// the block.
std::pair<int64_t, int64_t> largest_subblock(int64_t h_tiles, int64_t w_tiles, int64_t max_h = 8) {
  constexpr std::array<std::pair<int64_t, int64_t>, 20> kChoices = {{
      {2, 4}, {4, 2}, {1, 8}, {8, 1}, {1, 7}, {7, 1}, {2, 3}, {3, 2}, {1, 6}, {6, 1},
      {1, 5}, {5, 1}, {2, 2}, {1, 4}, {4, 1}, {1, 3}, {3, 1}, {1, 2}, {2, 1}, {1, 1},
  }};
  for (auto [h, w] : kChoices)
    if (h * w <= 8 && h <= max_h && h_tiles % h == 0 && w_tiles % w == 0) return {h, w};
  return {1, 1};
}

// A non-causal window on keys that end more than W/2 before the last
// queries leaves their q chunk no key chunk to read: the kernel would run
// no loop for it and write no output.
std::string window_problem(const Shape& q, const Shape& k, const SdpaConfig& cfg) {
  if (cfg.sliding_window_size <= 0 || cfg.is_causal) return "";
  const int64_t qc = cfg.q_chunk_size, kc = cfg.k_chunk_size, nq = (q[2] + qc - 1) / qc, nk = (k[2] + kc - 1) / kc;
  const SdpaKRange r = sdpa_streaming_k_range(cfg, (nq - 1) * (qc / kTile), qc / kTile, kc / kTile, nk);
  if (r.begin < r.end) return "";
  return "sliding_window_size " + std::to_string(cfg.sliding_window_size) + " with is_causal=false: the last q chunk's " +
         "window holds none of K's " + std::to_string(k[2]) + " keys (the kernel would read no key chunk for it)";
}

}  // namespace

SdpaStreamingPlan sdpa_streaming_plan(const SdpaConfig& cfg) {
  SdpaStreamingPlan p;
  const int64_t sq = cfg.q_chunk_size / kTile, sk = cfg.k_chunk_size / kTile;
  p.sbh = largest_subblock(sq, sk).first;
  p.qkt_subblock_w = 8 / p.sbh;
  p.kt_num_subblocks = (sk + p.qkt_subblock_w - 1) / p.qkt_subblock_w;
  return p;
}

std::string sdpa_padded_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask,
                                const SdpaConfig& cfg) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) return "expected Q (b, nqh, s, dh) and K, V (b, nkv, s, dh), 4-D each";
  // The shape checks of the 2024 kernel, with the chunk sizes dividing the
  // padded lengths (the factory pads to whole chunks). Any length, with a
  // mask too: a partial last key tile then takes the mask's tile padding
  // (streaming_pad; sdpa_padded_mask_note says so).
  SdpaConfig c = cfg;
  if (c.q_chunk_size < kTile || c.k_chunk_size < kTile || c.q_chunk_size % kTile || c.k_chunk_size % kTile)
    return sdpa_problem(q, k, v, mask, cfg);  // its chunk-size message
  Shape qp = q, kp = k, vp = v;  // padded as the factory pads them (padded_Sq, padded_Sk)
  qp[2] = (q[2] + c.q_chunk_size - 1) / c.q_chunk_size * c.q_chunk_size;
  kp[2] = vp[2] = (k[2] + c.k_chunk_size - 1) / c.k_chunk_size * c.k_chunk_size;
  if (c.is_causal && q[2] != k[2])
    return "a causal SDPA needs K's sequence length (" + std::to_string(k[2]) + ") equal to Q's (" +
           std::to_string(q[2]) + ")";
  c.is_causal = false;
  Shape mp;
  if (mask) {
    if (cfg.is_causal) return "a mask is given with is_causal=true (TT-NN takes a mask only with is_causal=false)";
    if (mask->size() != 4 || (*mask)[2] != q[2] || (*mask)[3] != k[2])
      return "expected MASK (b, 1 or nqh, " + std::to_string(q[2]) + ", " + std::to_string(k[2]) + ")";
    mp = *mask;
    mp[2] = qp[2];
    mp[3] = kp[2];
  }
  return sdpa_problem(qp, kp, vp, mask ? &mp : nullptr, c);
}

std::string sdpa_streaming_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask,
                                   const SdpaConfig& cfg, int64_t chunk_start) {
  if (cfg.compute.fp32_dest_acc_en)
    return "the streaming kernel runs only with fp32_dest_acc_en off (TT-NN picks the standard kernel otherwise)";
  // Any head dim: d2ed8d9b's normalize packed a row's output tiles in one
  // Dst batch (static_assert head_dim_t_ <= 8), the headers that take
  // 15a15bf5's sink argument batch them by the Dst's size; every output
  // column is its own product either way.
  if (chunk_start != 0)  // chunked prefill: whole q chunks, keys gathered to a whole k chunk
    return sdpa_problem(q, k, v, mask, cfg, chunk_start);
  const std::string p = sdpa_padded_problem(q, k, v, mask, cfg);
  if (!p.empty()) return p;
  return window_problem(q, k, cfg);
}

int64_t sdpa_streaming_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                                const TileTensor* mask, const SdpaConfig& cfg) {
  const int64_t sq = cfg.q_chunk_size / kTile, sk = cfg.k_chunk_size / kTile;
  const int64_t dht = q.pcols / kTile, vdht = v.pcols / kTile, bf16 = tile_bytes(DataFormat::Bfloat16);
  const bool padded_k = !cfg.is_causal && k.rows % cfg.k_chunk_size != 0;
  // -inf tile, causal diagonal or the window's four edge tiles, the partial
  // tile (k_partial_col, non-causal)
  const bool window = cfg.sliding_window_size > 0;
  const int64_t palette = 1 + (window ? 4 : cfg.is_causal ? 1 : 0) + (padded_k && k.rows % kTile != 0 ? 1 : 0);
  int64_t b = sq * dht * tile_bytes(q.format) * 2 + sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format)) * 2;
  if (mask) b += sq * sk * 2 * tile_bytes(mask->format);
  else if (cfg.is_causal || padded_k || window) b += palette * bf16;
  if (!cfg.attention_sink.empty()) b += bf16;  // attention_sink_tile_count: one scalar tile when streaming
  const int64_t out_h = largest_subblock(sq, vdht, 2).first;
  // identity_scale_in and col_identity in scalar_df (Float32 with a float32 Q)
  const int64_t scalar = tile_bytes(q.format == DataFormat::Float32 ? DataFormat::Float32 : DataFormat::Bfloat16);
  b += (sq * sk + 2 * sq * vdht + 5 * sq + 1) * bf16 + 2 * scalar + 2 * out_h * vdht * tile_bytes(cfg.compute.output);
  return b;
}

void tt_sdpa_streaming(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                       TileTensor& out, const SdpaConfig& cfg, const Exec& ex, int64_t chunk_start) {
  const std::string p =
      sdpa_streaming_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg, chunk_start);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const StreamingInputs in = streaming_pad(q, k, v, mask, cfg);
  out = make_tile_tensor(sdpa_out_shape(q, v), cfg.compute.output);
  StreamingRun run = streaming_run(in, cfg, ex.kernels(cfg.compute.arch), out, chunk_start);
  std::vector<detail::In1Buffer> kt, vd;
  if (run.tm.kern) {
    sdpa_decode_kv(in.k, in.v, run.tm.fp32, cfg.k_chunk_size, ex, kt, vd);
    run.kt = &kt;
    run.vd = &vd;
  }
  const int64_t BH = q.shape[0] * q.shape[1], NQC = in.q.rows / cfg.q_chunk_size;
  std::vector<StreamingWork> work(static_cast<size_t>(ex.threads()));
  // Tasks: (bh, q chunk), the longest (last) causal chunks first.
  ex.parallel_for(BH * NQC, [&](int64_t t, int th) {
    streaming_q_chunk(run, t % BH, NQC - 1 - t / BH, work[static_cast<size_t>(th)]);
  });
}

}  // namespace mha::ttsim
