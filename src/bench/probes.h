#pragma once
// What the machine can do, for the rows to be held against: the sgemm rate
// prefill rows are held against, the FMA peak attention is held against
// (fma_peak.h) and the memory read bandwidth decode rows are held against,
// each at a row's thread count. The sgemm and FMA probes are kept in the
// user's cache store so a later run can reuse them (ProbeMode); decode rows
// always probe the bandwidth at their own moment (it drifts most).
#include <cstdint>
#include <map>
#include <optional>
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
// The loop each of its threads runs (probe_loops_avx2.cpp): the sum of n
// floats (n a multiple of 64, p 32-byte aligned) with eight independent
// accumulators, so that it is bound by loads, not by the add latency.
float read_sum_avx2(const float* p, int64_t n);

// The hardware thread count (at least 1).
int hardware_threads();

// How a run gets the rates its rows are held against (`mha bench --probes`):
//   none    no probe at all: the rows' % columns stay empty (and decode rows
//           take no bandwidth probes either);
//   cached  the last probe of this CPU model, ISA, thread count and build
//           from the user's cache store (util/user_cache.h, kind "probes"),
//           probing and storing when there is none;
//   fresh   probe now, and store the result for later cached runs.
enum class ProbeMode { None, Cached, Fresh };
const char* probe_mode_name(ProbeMode m);
// "none", "cached", "fresh"; nothing for anything else.
std::optional<ProbeMode> probe_mode_from_name(const std::string& name);

// Where one probe's figures came from: taken in this run or read from the
// store, and when it ran (UTC ISO 8601). taken empty: not probed.
struct ProbeStamp {
  bool from_cache = false;
  std::string taken;
  bool probed() const { return !taken.empty(); }
  std::string text() const;  // "this run, 2026-..Z" / "cached, taken 2026-..Z"
};

struct MachineRates {
  double sgemm_gflops = 0;
  ProbeStamp sgemm;
  double read_gbs = 0;       // generate rows: the better of their own two probes
  double fma_gflops = 0;     // the FMA peak (fma_peak.h)
  std::string fma_isa;       // the ISA its loop ran on
  double fma_avx2_gflops = 0;  // the AVX2 loop's peak (the same as fma_gflops without AVX-512)
  double fma_cpu_gflops = 0;       // per CPU-second of one thread, widest ISA (FmaPeak::cpu_gflops)
  double fma_avx2_cpu_gflops = 0;  // likewise, the AVX2 loop
  ProbeStamp fma;
};

// The key a probe is stored under: CPU model, ISA, thread count and build,
// the things that change what a probe measures.
std::string probe_store_key(int threads);

// Each probe a row reports, taken at most once per thread count and run, and
// only when a row asks for it: forward and prefill rows the sgemm rate, rows
// that time their attention the FMA peak; decode rows take their own
// bandwidth probes around their timed runs (read_gbs_now). Under
// ProbeMode::None nothing is probed and every rate reads 0.
class RateCache {
 public:
  explicit RateCache(int64_t bandwidth_bytes = 0, ProbeMode mode = ProbeMode::Fresh)
      : bandwidth_bytes_(bandwidth_bytes), mode_(mode) {}
  ProbeMode mode() const { return mode_; }
  // The rates at `threads` with the sgemm (resp. FMA) probe filled in.
  const MachineRates& with_sgemm(int threads);
  const MachineRates& with_fma(int threads);
  // A fresh read-bandwidth probe (never stored; 0 under ProbeMode::None):
  // decode rows take one on each side of their timed runs, since the
  // bandwidth drifts most on shared hosts.
  double read_gbs_now(int threads) const {
    return mode_ == ProbeMode::None ? 0.0 : probe_read_bandwidth_gbs(threads, bandwidth_bytes_);
  }

 private:
  MachineRates& entry(int threads);
  int64_t bandwidth_bytes_;
  ProbeMode mode_;
  std::map<int, MachineRates> rates_;
};

}  // namespace mha::bench
