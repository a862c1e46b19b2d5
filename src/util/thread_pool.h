#pragma once
// A small fixed thread pool for the parallel loops of the cpu and tt-sim
// backends.
//
// Tasks are claimed from a shared counter, so which thread runs a task
// varies run to run; results stay bit-identical because every task writes
// only its own output region and uses only its thread's scratch, whose
// contents never flow from one task into another.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mha {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(task, thread) for task in [0, count) on every thread, the
  // caller included, and returns when all are done. The first exception
  // thrown by a task is rethrown here after the others finish.
  void parallel_for(int64_t count, const std::function<void(int64_t task, int thread)>& fn);

 private:
  void worker_loop(int thread);
  void drain(int thread);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t count_ = 0;
  int64_t next_ = 0;           // guarded by mu_: tasks are ms-sized, a lock per claim is cheap
  int busy_ = 0;               // workers still inside the current generation
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace mha
