#pragma once
// Sequence-parallel ring attention over MPI ("parallel": {"sequence": N}).
//
//   rank 0 reads config and weights and sends rank r the q/k/v/out weights,
//   its rows' rope positions and its token rows x [B, n, E] (n = L/N), or,
//   for a rand/randn input, the seed to draw them itself (ring_io.h: a .npy
//   input is read by row ranges, one rank at a time; others whole).
//   Non-causal runs give rank r the contiguous block [r*n, (r+1)*n); causal
//   runs split L into 2N chunks and give rank r chunks r and 2N-1-r
//   (zigzag), so every rank has the same number of visible keys to attend.
//   Each rank projects its rows (q, k, v; rope at the rows' true positions),
//   then in N steps attends its queries to the K/V block it holds while a
//   non-blocking send passes that block to rank r+1 and receives rank r-1's;
//   an online softmax (running max, running sum, accumulator) merges the
//   blocks. Keys are masked by MaskRule on their true positions; a chunk
//   pair no query can see is skipped. Each rank projects its own context
//   rows; rank 0 takes the output rows rank by rank.
// What a rank holds at its peak (the ring steps): q and the accumulator for
// its n rows, three K|V half-blocks (attended and sent, next, arriving: the
// block travels in two halves), softmax max/sum: about
// n * (H*dh + H*dv + 1.5*G*(dh+dv)) values, 1/N of a one-process run's
// activations. x is freed after the last pass's projection; the output rows
// [B, n, O] are sent to rank 0, which writes them into the output file as
// they arrive and keeps the whole output only when the report needs it
// (ring_io.h). Nothing is gathered whole.
// Arithmetic: the backend's, through its partial-attention primitive
// (backends/partial.h): every rank makes the configured backend, projects
// with project_rows and attends each K/V block with attend_partial, carrying
// the online-softmax state; this file only chunks, exchanges, overlaps and
// normalises. Any backend that supports Capability::PartialAttention runs
// here (cpu: its flash kernel, float32; reference: float64 loops). The
// merge order differs from a one-process softmax, so the output equals a
// one-process run within a tolerance only (docs/CONFIG.md).
#include <cstdint>
#include <utility>
#include <vector>

#include "parallel/ring_io.h"
#include "parallel/workers.h"
#include "run/runner.h"

namespace mha::parallel {


// Token chunks [start, start + length) of rank `part` of `parts` over L
// tokens (see above); InputError when L does not split evenly.
std::vector<std::pair<int64_t, int64_t>> ring_chunks(int64_t L, int64_t part, int64_t parts, bool causal);

// Rank 0, before any input is read: refuses what a ring cannot run (rank
// count, attention weights, stages, decode, a backend without the
// partial-attention primitive).
void check_ring_request(const PreparedRun& run, const Backend& backend, const RunRequest& request);

// Rank 0, after check_ring_request, with `run`'s inputs prepared as `input`
// says (ring_io.h, prepare_ring_input; or whole, InputState::Ready):
// checks the inputs, distributes, runs its block, gathers.
// backend_info.parallel reports mode, ranks and bytes_sent_per_rank.
// `fault.bad_shape_rank` (tests): that rank is sent an empty message, which
// it fails to decode (a failure on one rank).
RunReport run_ring(PreparedRun& run, const RingInput& input, Backend& backend, const RunRequest& request,
                   WorkerRelease& release, const Fault& fault = {});

// Every other rank, once rank 0 released it in sequence mode: 0, or 2 when
// the run failed on any rank (rank 0 prints it).
int serve_ring();

}  // namespace mha::parallel
