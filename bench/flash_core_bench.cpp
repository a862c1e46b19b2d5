// mha_flash_bench: the cpu flash kernel alone (no projections, no rope) on
// one causal grouped-query shape, the attention core that
// scripts/bench_vs_torch.py --gqa-core compares with PyTorch's eager one.
//   mha_flash_bench L H KV D [threads] [reps] [avx2|auto]
// Prints one line: wall and CPU-time medians over reps cached runs (after
// one untimed run) and the kernel ISA. Random inputs; the causal half of
// the score matrix counts as the work (2 * 2 * H * D * L(L+1)/2 FLOP).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_flash_kernel.h"
#include "util/thread_pool.h"

namespace {

double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s L H KV D [threads] [reps] [avx2|auto]\n", argv[0]);
    return 2;
  }
  const int64_t L = std::atoll(argv[1]), H = std::atoll(argv[2]), KV = std::atoll(argv[3]), D = std::atoll(argv[4]);
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1, reps = argc > 6 ? std::atoi(argv[6]) : 3;
  const bool avx2 = argc > 7 && std::string(argv[7]) == "avx2";
  if (L < 1 || H < 1 || KV < 1 || H % KV != 0 || D < 1 || threads < 1 || reps < 1) {
    std::fprintf(stderr, "mha_flash_bench: need L, H, KV, D, threads, reps >= 1 and H a multiple of KV\n");
    return 2;
  }
  using namespace mha::cpu;
  std::vector<float> q(L * H * D), k(L * KV * D), v(L * KV * D), ctx(L * H * D);
  std::mt19937 g(0);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = nd(g);
  FlashArgs a;
  a.B = 1, a.L = L, a.S = L, a.St = L, a.H = H, a.Hkv = KV, a.dh = D, a.dv = D;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.ldq = H * D, a.ldk = KV * D, a.ldv = KV * D;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.rule.causal = true;
  a.ctx = ctx.data(), a.ldc = H * D;
  const FlashKernel kern = avx2 ? flash_block_avx2 : flash_kernel();
  mha::ThreadPool pool(threads);
  std::vector<FlashScratch> scratch(threads);
  for (FlashScratch& s : scratch) s.resize(D, D);
  const int64_t nqb = flash_query_blocks(L), sets = flash_head_sets(H, KV);
  // The cpu backend's schedule (cpu_flash_run.cpp): longest blocks first.
  auto pass = [&] {
    pool.parallel_for(sets * nqb, [&](int64_t t, int thread) { kern(a, 0, t / nqb, nqb - 1 - t % nqb, scratch[thread]); });
  };
  pass();
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    pass();
    cpu.push_back(cpu_ms() - c0);
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double gflop = 4.0 * H * D * static_cast<double>(L) * (L + 1) / 2 / 1e9;
  std::printf("flash %s L %lld H %lld KV %lld D %lld threads %d: wall median %.1f ms (%.1f GFLOP/s), cpu median %.1f ms\n",
              kern == flash_block_avx512 ? "avx512" : "avx2", static_cast<long long>(L), static_cast<long long>(H),
              static_cast<long long>(KV), static_cast<long long>(D), threads, median(wall),
              gflop / (median(wall) / 1e3), median(cpu));
  return 0;
}
