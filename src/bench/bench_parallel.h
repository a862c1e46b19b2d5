#pragma once
// `mpirun -np N mha bench --parallel heads|sequence`: each row of the sweep
// runs twice, on rank 0 alone and then across all N ranks.
//
//   baseline  one process on rank 0 with N x t threads (t: the row's
//             threads per rank), the path `mha run` takes without
//             "parallel": the one-process speed the split is held against;
//             the other ranks wait without spinning meanwhile.
//   parallel  the same row across the N ranks with t threads each, as
//             `mpirun -np N mha run` with "parallel": {"heads"|"sequence": N}
//             runs it; its efficiency is 100 x baseline median / its median
//             (100 %: N ranks of t threads are as fast as one process with
//             as many threads in all).
// Rank 0 sends every other rank one command per row (run it, or stop), so
// a bad row or flag stops all ranks with rank 0's one line.
#include <cstdint>
#include <vector>

#include "bench/bench.h"
#include "config/config.h"

namespace mha::bench {

// Rank 0's hold on the waiting ranks. Unless finish() was called, its
// destructor tells them to stop (exit code 2: rank 0 reports the error).
class RankCommands {
 public:
  RankCommands() = default;
  ~RankCommands();
  RankCommands(const RankCommands&) = delete;
  RankCommands& operator=(const RankCommands&) = delete;
  void run_row();  // every other rank joins the next parallel row
  void row_done();
  void finish();   // every other rank exits 0

 private:
  bool in_row_ = false, finished_ = false;
};

// Rank 0: the baseline and the parallel result of one forward row; threads
// per rank from row.threads (0: the backend's default on each rank and in
// the baseline).
std::vector<Result> run_parallel_row(const Row& row, ParallelConfig::Mode mode, int64_t warmup, int64_t repetitions,
                                     RateCache& rates, RankCommands& ranks);

// Every other rank: joins rank 0's rows until it says stop; the exit code
// (0, or 2 when a row failed on any rank: rank 0 prints it).
int serve_bench();

}  // namespace mha::bench
