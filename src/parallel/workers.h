#pragma once
// How rank 0 lets the other ranks go: after reading the config and checking
// what it can, rank 0 broadcasts the mode the run takes; a worker then runs
// that mode's side (parallel/driver.h's serve_rank picks it).
#include <cstdint>

namespace mha::parallel {

enum class WorkerMode : int64_t {
  Stop = 0,      // rank 0 failed before handing out work: exit with code 2
  Heads = 1,     // head-parallel (parallel/head_parallel.h)
  Sequence = 2,  // ring attention (parallel/ring.h)
  Op = 3,        // `mha op` split by heads (parallel/op_heads.h)
};

// On rank 0 of a multi-rank world, from before anything that can fail:
// unless go() was called, its destructor tells the waiting workers to stop
// (they exit with code 2 while rank 0 reports the error).
class WorkerRelease {
 public:
  WorkerRelease() = default;
  ~WorkerRelease();
  WorkerRelease(const WorkerRelease&) = delete;
  WorkerRelease& operator=(const WorkerRelease&) = delete;
  void go(WorkerMode mode);

 private:
  bool released_ = false;
};

// Every rank but 0: what rank 0's WorkerRelease said.
WorkerMode wait_for_release();

// For tests: the rank whose work is spoiled before it is sent (head-parallel:
// its query loses a row; ring: an empty message), a failure on one rank.
struct Fault {
  int bad_shape_rank = -1;
};

}  // namespace mha::parallel
