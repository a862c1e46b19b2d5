#pragma once
// The machine's float32 FMA peak, measured: a register-resident loop of
// independent fused multiply-adds (no memory traffic, no dependency chain
// shorter than the FMA latency times the pipes) on the widest vector ISA the
// CPU runs, chosen at run time so the binary still runs on AVX2-only
// machines. The loops live in their levels' files (fma_peak_avx512.cpp,
// probe_loops_avx2.cpp), built with those levels' flags (CMakeLists.txt).
#include <cstdint>

namespace mha::bench {

// `iters` iterations of the loop on the calling thread; returns the FLOPs
// done (2 per lane per FMA). The *_avx512 one only where the CPU has it.
double fma_loop_avx2(int64_t iters);
double fma_loop_avx512(int64_t iters);

struct FmaPeak {
  double gflops = 0;
  const char* isa = "";  // "avx512" or "avx2"
  // The AVX2 loop's peak: gflops itself on an AVX2-only CPU; on an AVX-512
  // one, what the AVX2 kernels (the cpu backend's kernels=avx2) are held to.
  double avx2_gflops = 0;
  // GFLOP/s per CPU-second of one thread (each thread's FLOPs over its own
  // CPU time, the best run's mean over threads): the rate while scheduled,
  // which other tenants of a shared machine do not dilute.
  double cpu_gflops = 0, avx2_cpu_gflops = 0;
};

// GFLOP/s of `threads` threads (>= 1) each running the loop at once, best of
// five ~20 ms runs after a warm-up (which also lets the clock settle); the
// CPU-time rates the best of the same five.
FmaPeak probe_fma_peak(int threads);

}  // namespace mha::bench
