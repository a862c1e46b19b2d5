#pragma once
// What the machine can do, measured in the same process as the rows it is
// compared with (the machine is shared and its speed drifts): the sgemm rate
// prefill rows are held against, the FMA peak attention is held against
// (fma_peak.h) and the memory read bandwidth decode rows are held against,
// each at a row's thread count.
#include <cstdint>
#include <map>
#include <string>

namespace mha::bench {

// OpenBLAS sgemm GFLOP/s on an n x n x n product with `threads` OpenBLAS
// threads (0: OpenBLAS's own default), best of three after a warm-up call.
double probe_sgemm_gflops(int64_t n = 1024, int threads = 0);

// Read bandwidth in GB/s (1e9 bytes/s): `threads` threads (0: one per
// hardware thread) each sum their own slice of a buffer of `bytes` (0: the
// larger of 256 MiB and 4x the last-level cache, so it streams from DRAM),
// with AVX2 loads; best of four passes after one that faults the pages in.
// InputError when the buffer cannot be allocated.
double probe_read_bandwidth_gbs(int threads = 0, int64_t bytes = 0);

// The hardware thread count (at least 1).
int hardware_threads();

struct MachineRates {
  double sgemm_gflops = 0;
  double read_gbs = 0;
  double fma_gflops = 0;     // the FMA peak (fma_peak.h)
  std::string fma_isa;       // the ISA its loop ran on
  double fma_avx2_gflops = 0;  // the AVX2 loop's peak (the same as fma_gflops without AVX-512)
  double fma_cpu_gflops = 0;       // per CPU-second of one thread, widest ISA (FmaPeak::cpu_gflops)
  double fma_avx2_cpu_gflops = 0;  // likewise, the AVX2 loop
};

// Probes once per thread count and keeps the result for the run's later rows.
class RateCache {
 public:
  explicit RateCache(int64_t bandwidth_bytes = 0) : bandwidth_bytes_(bandwidth_bytes) {}
  const MachineRates& at(int threads);
  // A fresh read-bandwidth probe (not cached): decode rows take one on each
  // side of their timed runs, since the bandwidth drifts most on shared hosts.
  double read_gbs_now(int threads) const { return probe_read_bandwidth_gbs(threads, bandwidth_bytes_); }

 private:
  int64_t bandwidth_bytes_;
  std::map<int, MachineRates> rates_;
};

}  // namespace mha::bench
