#include "parallel/driver.h"

#include "parallel/head_parallel.h"
#include "parallel/op_heads.h"
#include "parallel/ring.h"

namespace mha {

RunMode run_mode(const RunConfig& config) {
  if (!config.parallel) return RunMode::Single;
  switch (config.parallel->mode) {
    case ParallelConfig::Mode::Heads: return RunMode::Heads;
    case ParallelConfig::Mode::Sequence: return RunMode::Sequence;
  }
  return RunMode::Single;
}

PreparedRun prepare_for(const RunConfig& config) {
  return run_mode(config) == RunMode::Sequence ? prepare_model(config) : prepare_run(config);
}

RunReport drive_run(PreparedRun& run, Backend& backend, const RunRequest& request, parallel::WorkerRelease& release,
                    const parallel::Fault& fault) {
  switch (run_mode(run.config)) {
    case RunMode::Single: return execute_run(run, backend, request);
    case RunMode::Heads: return parallel::run_heads(run, backend, request, release, fault);
    case RunMode::Sequence: {
      // What a ring refuses is refused before any input is read; then the
      // inputs, by rows per rank where the run allows it, unless the caller
      // built them (a bench row's).
      parallel::check_ring_request(run, backend, request);
      const parallel::RingInput input =
          run.input_state == InputState::Pending ? parallel::prepare_ring_input(run) : parallel::RingInput{};
      return parallel::run_ring(run, input, backend, request, release, fault);
    }
  }
  return execute_run(run, backend, request);
}

int serve_rank() {
  switch (parallel::wait_for_release()) {
    case parallel::WorkerMode::Stop: return 2;  // rank 0 failed before handing out work
    case parallel::WorkerMode::Heads: return parallel::serve_heads();
    case parallel::WorkerMode::Sequence: return parallel::serve_ring();
    case parallel::WorkerMode::Op: return parallel::serve_op_heads();
  }
  return 2;
}

}  // namespace mha
