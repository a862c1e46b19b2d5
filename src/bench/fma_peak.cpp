#include "bench/fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace mha::bench {

// As fma_loop_avx512, on 8-float AVX2 vectors: 12 accumulators (AVX2 has 16
// registers; two hold a and b).
double fma_loop_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  __m256 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) c[i] = _mm256_fmadd_ps(c[i], a, b);
  }
  __m256 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, c[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] > -1.0f ? 2.0 * 8 * 12 * static_cast<double>(iters) : 0.0;
}

namespace {

bool cpu_has_avx512f() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

// FLOPs of all threads / wall time from a common start to the last finish.
double run_threads(double (*loop)(int64_t), int threads, int64_t iters) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> flops(threads, 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      flops[t] = loop(iters);
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread& th : pool) th.join();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return sec > 0 ? total / sec / 1e9 : 0.0;
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
    double best = 0;
    for (int r = 0; r < 5; ++r) best = std::max(best, run_threads(f, threads, iters));
    return best;
  };
  FmaPeak p;
  p.gflops = best_of(loop);
  p.isa = avx512 ? "avx512" : "avx2";
  p.avx2_gflops = avx512 ? best_of(fma_loop_avx2) : p.gflops;
  return p;
}

}  // namespace mha::bench
