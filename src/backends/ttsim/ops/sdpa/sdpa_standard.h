#pragma once
// SDPA prefill at tt_metal `latest` with fp32_dest_acc_en on: the program
// factory (15a15bf5) binds sdpa_metal2.cpp, which runs compute_common.hpp's
// sdpa_standard (read at 637d956c; docs/TTSIM.md "tt-metal revisions").
// Against the 2024 kernel every step that sets bits moved:
//   - qk_im and the sum buffers are Float32 (unpacked to Src as TF32), the
//     statistics and out_im Float16_b;
//   - the scale is folded into the scores' exp (fast approx, scale on the
//     host, no input clamp: packer ReLU zeroes what falls below), so the
//     row max is over unscaled scores;
//   - causal masking stamps a generated Float16_b tile palette ([-inf,
//     diagonal]) onto qk_im by packer L1 accumulation;
//   - the row max is a reduce over TF32 scores and an SFPU max with the
//     previous max;
//   - row sums are the exp tiles L1-accumulated per row, rescaled and added
//     tile-wide, reduced once at the end by a matmul against a column of ones;
//   - O·α is L1-accumulated onto the new chunk's output;
//   - exp(m_old - m_new) takes the accurate exp when exp_approx_mode is on
//     and a degree-4 polynomial when it is off (the flag is inverted at that
//     site: tt-metal PR #56925);
//   - 1/sum is the legacy-compatible reciprocal on the first column, on
//     the device's own multiply-add (Wormhole or Blackhole);
//   - an attention sink enters after the row sums' reduction, as a virtual
//     key compared with the unscaled max and scaled in the exp;
//   - a causal sliding window is the writer's generated Bfp4_b mask added to
//     every k chunk (none is skipped; sdpa_window.h).
// Lengths that are not multiples of the chunk sizes (or of 32) are padded
// to whole chunks with zeros; causal, the diagonal hides the padded keys,
// else the writer's generated padding mask (use_padded_mask, Bfp4_b 0 /
// -inf) is added to the last k chunk's scores; padded query rows are not
// written.
// The oracle runs the lane models; tt_sdpa_standard runs the matrix unit's
// steps on the vector kernels and (batch x head, q chunk) tasks on the pool,
// bit-identical to it (tests/ttsim/sdpa_standard_test.cpp).
#include <cstdint>
#include <string>

#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "ttsim/exec.h"

namespace mha::ttsim {

// What this program cannot run ("" when it can): a non-causal sliding
// window (the 15a15bf5 writer would not generate the masks its kernel
// waits for). The device operation refuses it in one line.
std::string sdpa_standard_gap(const SdpaConfig& cfg);

// Circular buffers per core in the factory's formats (qk_im and sums
// Float32, Q chunks double-buffered when a core takes more than one).
int64_t sdpa_standard_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                               const SdpaConfig& cfg);

// out = SDPA(q, k, v[, mask]) as the kernel computes it: the lane models.
// chunk_start > 0 is chunked prefill, as tt_sdpa's (sdpa_kernel.h): the
// kernel's is_chunked adds chunked_q_chunk_offset to the q chunk before it
// takes the causal bounds and the diagonal stamp, nothing else.
void tt_sdpa_standard_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                             TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start = 0);
// The same on the vector kernels of ex's ISA and its pool (Scalar: the
// oracle's lane models), bit-identical.
void tt_sdpa_standard(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      TileTensor& out, const SdpaConfig& cfg, const Exec& ex, int64_t chunk_start = 0);

}  // namespace mha::ttsim
