#pragma once
// The one place a run's mode is chosen: one process, head-parallel or
// sequence-parallel (ring), from the config's "parallel" key. `mha run`,
// `mha bench --parallel` and the tests drive runs through here.
//
//   rank 0:  prepare_for(config) -> drive_run(run, backend, request, release)
//   others:  serve_rank()  (waits for rank 0's release, runs that mode's side)
#include "parallel/workers.h"
#include "run/runner.h"

namespace mha {

enum class RunMode { Single, Heads, Sequence };
RunMode run_mode(const RunConfig& config);

// What the mode needs prepared: everything for one process and
// head-parallel; the model only for a ring run (InputState::Pending), whose
// inputs drive_run prepares once the ring's checks pass, by rows per rank
// where it can (parallel/ring_io.h).
PreparedRun prepare_for(const RunConfig& config);

// Rank 0: runs `run` in its mode (execute_run, run_heads or run_ring),
// first preparing a ring run's pending inputs.
RunReport drive_run(PreparedRun& run, Backend& backend, const RunRequest& request, parallel::WorkerRelease& release,
                    const parallel::Fault& fault = {});

// Every other rank: waits for rank 0's release and serves that mode.
// Returns the exit code: 0, or 2 when the run failed on any rank (rank 0
// prints it).
int serve_rank();

}  // namespace mha
