#pragma once
// One q chunk of the streaming SDPA kernel (sdpa_inner_loop_step over the k
// chunks, then the per-row normalization), shared by the fast path and the
// oracle: the steps run the lane models when tm.kern is nullptr, else the
// vector kernels (bit-identical). Internal to ops/sdpa.
#include <string>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"

namespace mha::ttsim {

// The inputs padded as the kernel sees them: Q to a multiple of
// q_chunk_size rows, K and V to a multiple of k_chunk_size (zeros), a given
// mask to both. The reader (reader_interleaved_metal2.cpp at 15a15bf5)
// reads the mask's tiles up to valid_Skt = ceil(s_k / 32) whole, tile
// padding included, and fills only the key tiles past them with -inf; the
// factory stamps no partial tile over a given mask (k_partial_col is 0).
// So keys s_k .. the tile's end take K's zero padding (score 0), V's zero
// rows, and the mask's tile padding (0 after ttnn.to_layout / from_torch,
// as every tt-sim entry point makes it): they join the softmax (tt-metal
// #54833). A float32 Q keeps its format, its values cut to what the
// unpacker puts in Src.
struct StreamingInputs {
  TileTensor q, k, v, mask;
  bool has_mask = false;
  int64_t s_k = 0;  // K's logical sequence length
};
StreamingInputs streaming_pad(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                              const SdpaConfig& cfg);
// Why these shapes cannot be padded that way, or "": the latest programs'
// shared shape rules (4-D, the chunk sizes dividing the padded lengths,
// causal with equal lengths, a mask of Q's and K's lengths).
std::string sdpa_padded_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask,
                                const SdpaConfig& cfg);
// The one-line note a report prints when those padded keys join the
// softmax (tt_metal latest, a given mask, K's length not a multiple of
// 32), else "".
std::string sdpa_padded_mask_note(const SdpaConfig& cfg, int64_t s_k, bool has_mask);
// The latest factory's scale: cfg.scale, else 1/sqrt of Q's padded head dim
// (q.pcols), as a float (both programs' kernels and the op's mask multiply).
float sdpa_latest_scale(const SdpaConfig& cfg, const TileTensor& q);

struct StreamingRun {
  const StreamingInputs& in;
  const SdpaConfig& cfg;
  TileMath tm;
  SdpaStreamingPlan plan;
  float scale = 0, scale_bf16 = 0;  // fp32 (the score exp), truncated (the rescale exp)
  int64_t NQH = 0, NKH = 0, D = 0, DV = 0, QC = 0, KC = 0;
  int64_t chunk_start = 0;    // chunked prefill: Q's row 0 is this sequence position
  TileTensor* out = nullptr;  // (b, nqh, s, dh) in cfg.compute.output
  // The fast path's K^T and V per kv head, decoded once (sdpa_decode_kv);
  // nullptr: each k chunk's matmuls decode their own (the oracle).
  const std::vector<detail::In1Buffer>* kt = nullptr;
  const std::vector<detail::In1Buffer>* vd = nullptr;
};
StreamingRun streaming_run(const StreamingInputs& in, const SdpaConfig& cfg, const simd::KernelTable* kern,
                           TileTensor& out, int64_t chunk_start);

// Per-thread buffers.
struct StreamingWork {
  std::vector<float> S, sum_prev, sum_cur, o_prev, o_cur, tmp, row, m_prev, m_cur, ident;
  SdpaScratch s;
  std::vector<simd::ARec> qrec;  // the q chunk decoded as in0, once for its k chunks
};

// Query chunk qc of head bh (batch * NQH + query head): writes its rows of
// the output that lie within Q's logical length.
void streaming_q_chunk(const StreamingRun& r, int64_t bh, int64_t qc, StreamingWork& w);

}  // namespace mha::ttsim
