#pragma once
// Head-parallel attention over MPI ("parallel": {"heads": N}, N ranks).
//
//   rank 0 reads config, weights and inputs (prepare_run) and sends rank r
//   its share: the q/k/v projection rows of query heads
//   [r*H/N, (r+1)*H/N) and of their kv heads [r*Hkv/N, (r+1)*Hkv/N) (GQA
//   groups stay whole), no output projection, the full inputs and the
//   mask's rows for those heads.
//   every rank runs its share on the configured backend: context columns
//   [B, L, (H/N)*dv], which rank 0 gathers into context [B, L, H*dv] and
//   projects with Backend::project_output (asked for through
//   supports(Capability::OutputProjection)), the arithmetic of one process's
//   run. The output is bitwise equal to a one-process run's with "heads": 1
//   on reference and cpu, for any N that divides the heads and any thread count.
//   The reference backend computes each head's bits whatever heads surround
//   it. The cpu backend does too when asked (RunOptions::group_projections,
//   which every rank's pass sets): OpenBLAS rounds an element by the whole
//   call's shape, so it then projects q, k and v with one sgemm per
//   key/value group's columns (a share is whole groups: the same calls) and
//   cuts rows in batch groups that depend on the inputs' shape only, the
//   output projection included (backends/cpu/cpu_projection.h, cpu_plan.h).
//   Without it (a config without "parallel") one call covers all heads:
//   faster, and within float32 rounding of the grouped run.
//   tt-sim's share runs its SDPA pipeline up to nlp_concat_heads and its
//   project_output is that pipeline's output linear (ttsim_sdpa.h), bitwise
//   the config without "parallel".
//   tests/parallel compares the bytes on random shapes.
#include <string>

#include "parallel/workers.h"
#include "run/runner.h"

namespace mha::parallel {

// Rank `part` of `parts`'s share of `s` (see above); InputError when the
// heads do not split into `parts` equal shares.
AttentionSpec heads_share(const AttentionSpec& s, int64_t part, int64_t parts);
AttentionInputs inputs_share(const AttentionSpec& s, const AttentionInputs& in, int64_t part, int64_t parts);

// Rank 0: distributes the shares, runs its own, gathers and projects; the
// report as execute_run gives it for one process (timings of the whole
// parallel pass), plus "ranks" and "bytes_sent_per_rank" in backend_info.
RunReport run_heads(PreparedRun& run, Backend& backend, const RunRequest& request, WorkerRelease& release,
                    const Fault& fault = {});

// Every other rank, once rank 0 released it in heads mode: runs its share.
// Returns the exit code: 0, or 2 when the run failed on any rank (rank 0
// prints it).
int serve_heads();

}  // namespace mha::parallel
