#include "util/thread_pool.h"

namespace mha {

ThreadPool::ThreadPool(int threads) {
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::drain(int thread) {
  for (;;) {
    int64_t task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_ >= count_) return;
      task = next_++;
    }
    try {
      (*fn_)(task, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_ = count_;  // stop handing out work; the caller rethrows
    }
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(thread);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t count, const std::function<void(int64_t, int)>& fn) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    for (int64_t t = 0; t < count; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    count_ = count;
    next_ = 0;
    busy_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
    err = error_;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace mha
