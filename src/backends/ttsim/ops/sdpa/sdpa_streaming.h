#pragma once
// SDPA prefill as tt-metal's streaming compute kernel computes it
// (compute_streaming.hpp, sdpa_standard_v2): what TT-NN runs when
// fp32_dest_acc_en is off (docs/TTSIM.md, "SDPA prefill at tt_metal latest:
// the streaming kernel").
// Every circular buffer the factory makes for this path is Float16_b; the
// steps differ from the 2024 kernel (sdpa_kernel.h) in every place that sets
// bits: the scale rides in the score exp, masks and sums are added by the
// packer's L1 accumulation, the row sums are one matmul against a column of
// ones at the end, and the packer's ReLU clips the score exps.
#include <string>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"

namespace mha::ttsim {

// The kernel's subblocking, as the factory and the kernel derive it: qk
// subblock height sbh (determine_largest_subblock_size over q x k chunk
// tiles, Dst of 8 tiles), qkt_subblock_w = 8 / sbh, and the number of
// qk subblocks along a k chunk. Only sbh == 1 changes bits: the first
// row group's P @ V then splits its keys into kt_num_subblocks parts summed
// by L1 accumulation.
struct SdpaStreamingPlan {
  int64_t sbh = 1, qkt_subblock_w = 8, kt_num_subblocks = 1;
};
SdpaStreamingPlan sdpa_streaming_plan(const SdpaConfig& cfg);

// Why the streaming kernel cannot take these shapes / this config, or "".
// Sequence lengths need not be multiples of the chunk sizes nor of 32 (the
// kernel pads them; a partial last key tile is masked by the writer's
// partial tile, or with a given mask takes that mask's tile padding, as the
// device does: sdpa_padded_mask_note); the chunk sizes must satisfy the
// kernel's static_asserts; a non-causal window must reach K from every q
// chunk (an attention sink is emulated: normalize_row_streaming adds
// exp((sink - m) * scale) to the reduced row sum, docs/TTSIM.md).
// chunk_start > 0 (chunked prefill) takes the chunked rules of sdpa_problem
// instead of the padding.
std::string sdpa_streaming_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask,
                                   const SdpaConfig& cfg, int64_t chunk_start = 0);

// Circular buffers per core as the factory (15a15bf5) sizes them for this
// kernel: Q (two chunks), K and V double-buffered, the mask palette (or a
// given mask double-buffered), qk_im, out_im A/B, max A/B, sum A/B,
// exp_max_diff, the two scalar tiles, the reciprocal scratch tile, the
// attention sink's one tile (its scalar broadcast per row) and the
// output ping-pong (two subblock rows of out_subblock_h <= 2 tiles; the
// factory's streaming_cb_out_tiles is not in the store: this is its
// documented 2-slot shape).
int64_t sdpa_streaming_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                                const TileTensor* mask, const SdpaConfig& cfg);

// out = SDPA(q, k, v [+ mask]) by the streaming kernel; same contract as
// tt_sdpa (sdpa_kernel.h), chunk_start included: 15a15bf5's kernel passes
// chunked_q_chunk_offset to sdpa_standard_v2, which offsets the q chunk's
// causal bounds and diagonal as sdpa_standard does. Work is split over
// (batch x head, q chunk) on ex's pool; ex.isa Scalar runs the lane models.
void tt_sdpa_streaming(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                       TileTensor& out, const SdpaConfig& cfg, const Exec& ex = Exec{}, int64_t chunk_start = 0);

// The oracle: the kernel's loops on the scalar lane models, one thread.
void tt_sdpa_streaming_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                              TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start = 0);

// The lane steps the kernel runs on one score, kept apart for tests:
// the score exp, exp_packthread_tile<approx, fast, no input clamping> with
// the fp32 scale folded into the Schraudolph constants, stored to the 16-bit
// Dst, with the packer's ReLU applied (negative outputs -> +0); the caller
// packs.
float sdpa_streaming_score_exp(float d, float scale, Arch arch);
// The same on n values in place, their multiply-add on kern's lanes where
// it can take them (nullptr: the lane model throughout); bit-identical.
void sdpa_streaming_score_exps(float* x, int64_t n, float scale, const simd::KernelTable* kern, Arch arch);
// The rescale factor exp((m_old - m_new) * scale_bf16) as
// calculate_exponential_first_column computes it: `approximate` picks the
// piecewise approximation (0 below -42), else exp_21f; stored to the 16-bit
// Dst. Which one a config gets is inverted (see below).
float sdpa_streaming_alpha_exp(float d, float scale_bf16, bool approximate, Arch arch);

// What the kernel does with exp_approx_mode, one line each for reports:
// the score exp ignores it (always approximate; tt-metal #56710), and the
// first-column exps receive it inverted (exp_approx_mode=true gives the
// accurate exp; tt-metal PR #56925, open at this revision).
std::vector<std::string> sdpa_streaming_flag_notes(const SdpaConfig& cfg);

}  // namespace mha::ttsim
