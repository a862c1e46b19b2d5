#include "bench/fma_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>
#include <vector>

#include "vec/isa.h"

namespace mha::bench {

namespace {

// The project's probe (src/vec/isa.h): fma_peak_avx512.cpp is built for
// the avx512 level's features, so that is what must be checked.
bool cpu_has_avx512f() { return vec::cpu_supports(vec::Isa::Avx512); }

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Rates {
  double wall = 0, cpu = 0;  // GFLOP/s: all threads over the wall time; per thread over its CPU time, mean
};

// FLOPs of all threads / wall time from a common start to the last finish,
// and each thread's FLOPs / its own CPU time, averaged.
Rates run_threads(double (*loop)(int64_t), int threads, int64_t iters) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> flops(threads, 0.0), cpu(threads, 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const double c0 = thread_cpu_seconds();
      flops[t] = loop(iters);
      cpu[t] = thread_cpu_seconds() - c0;
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread& th : pool) th.join();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Rates r;
  for (int t = 0; t < threads; ++t) {
    r.wall += flops[t];
    r.cpu += cpu[t] > 0 ? flops[t] / cpu[t] / 1e9 / threads : 0.0;
  }
  r.wall = sec > 0 ? r.wall / sec / 1e9 : 0.0;
  return r;
}

}  // namespace

FmaPeak probe_fma_peak(int threads) {
  const bool avx512 = cpu_has_avx512f();
  double (*loop)(int64_t) = avx512 ? fma_loop_avx512 : fma_loop_avx2;
  threads = std::max(1, threads);
  // Iterations for ~20 ms at a few GHz: 16 (or 12) FMAs per iteration at
  // about two per cycle.
  const int64_t iters = 4'000'000;
  auto best_of = [&](double (*f)(int64_t)) {
    run_threads(f, threads, iters / 4);  // warm-up
    Rates best;
    for (int r = 0; r < 5; ++r) {
      const Rates x = run_threads(f, threads, iters);
      best.wall = std::max(best.wall, x.wall), best.cpu = std::max(best.cpu, x.cpu);
    }
    return best;
  };
  FmaPeak p;
  const Rates wide = best_of(loop), narrow = avx512 ? best_of(fma_loop_avx2) : wide;
  p.isa = avx512 ? "avx512" : "avx2";
  p.gflops = wide.wall, p.cpu_gflops = wide.cpu;
  p.avx2_gflops = narrow.wall, p.avx2_cpu_gflops = narrow.cpu;
  return p;
}

}  // namespace mha::bench
