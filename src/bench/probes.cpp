#include "bench/probes.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/fma_peak.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/user_cache.h"
#include "vec/isa.h"

namespace mha::bench {

namespace {

using Clock = std::chrono::steady_clock;

int64_t last_level_cache_bytes() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return std::max<long>({l3, l2, 0});
}

}  // namespace

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

double probe_sgemm_gflops(int64_t n, int threads) {
  const int previous = openblas_get_num_threads();
  if (threads > 0) openblas_set_num_threads(threads);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto* v : {&a, &b})
    for (float& x : *v) x = u(rng);
  double best = 1e300;
  for (int i = 0; i < 4; ++i) {
    auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i > 0) best = std::min(best, s);  // the first run warms caches and threads
  }
  openblas_set_num_threads(previous);
  return 2.0 * n * n * n / best / 1e9;
}

double probe_read_bandwidth_gbs(int threads, int64_t bytes) {
  if (threads <= 0) threads = hardware_threads();
  if (bytes <= 0) bytes = std::max<int64_t>(int64_t{256} << 20, 4 * last_level_cache_bytes());
  // Whole 64-float (256-byte) blocks per thread, at least one each.
  const int64_t per_thread = std::max<int64_t>(64, bytes / 4 / threads / 64 * 64);
  const int64_t n = per_thread * threads;
  std::unique_ptr<float, decltype(&std::free)> buf(
      static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float))), &std::free);
  if (!buf) throw InputError("read-bandwidth probe: cannot allocate " + std::to_string(n * 4 >> 20) + " MiB");
  std::vector<float> sums(threads);
  auto pass = [&](bool fill) {
    std::vector<std::thread> pool;
    auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        float* p = buf.get() + t * per_thread;
        // Each thread faults in its own slice, so on a NUMA machine the
        // pages sit next to the thread that reads them.
        if (fill) std::fill(p, p + per_thread, 1.0f);
        sums[t] += read_sum_avx2(p, per_thread);
      });
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  pass(true);
  double best = 1e300;
  for (int i = 0; i < 4; ++i) best = std::min(best, pass(false));
  // The sums are checked so the compiler cannot drop the reads.
  float total = 0;
  for (float s : sums) total += s;
  if (total <= 0) return 0;
  return static_cast<double>(n) * sizeof(float) / best / 1e9;
}

const char* probe_mode_name(ProbeMode m) {
  switch (m) {
    case ProbeMode::None: return "none";
    case ProbeMode::Cached: return "cached";
    case ProbeMode::Fresh: break;
  }
  return "fresh";
}

std::optional<ProbeMode> probe_mode_from_name(const std::string& name) {
  for (ProbeMode m : {ProbeMode::None, ProbeMode::Cached, ProbeMode::Fresh})
    if (name == probe_mode_name(m)) return m;
  return std::nullopt;
}

std::string ProbeStamp::text() const { return (from_cache ? "cached, taken " : "this run, ") + taken; }

std::string probe_store_key(int threads) {
  // The ISA the FMA loop picks (fma_peak.cpp); a VM may hide AVX-512 from a CPU model that has it.
  return machine_key(vec::isa_name(vec::best_isa()), threads);
}

namespace {

const char* const kStoreKind = "probes";

// A stored figure: a positive number, else nothing (a garbled entry is re-probed).
std::optional<double> stored_rate(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number() || !(it->get<double>() > 0)) return std::nullopt;
  return it->get<double>();
}

std::optional<ProbeStamp> stored_stamp(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_string() || it->get<std::string>().empty()) return std::nullopt;
  return ProbeStamp{true, it->get<std::string>()};
}

// The stored entry at `threads`, or an empty object.
nlohmann::json stored_entry(int threads) {
  std::optional<nlohmann::json> e = user_cache_get(kStoreKind, probe_store_key(threads));
  return e && e->is_object() ? *e : nlohmann::json::object();
}

// Merges `fields` into the stored entry at `threads` (the other probe's
// figures, stored by an earlier run, stay).
void store(int threads, const nlohmann::json& fields) {
  nlohmann::json e = stored_entry(threads);
  e.update(fields);
  user_cache_put(kStoreKind, probe_store_key(threads), e);
}

bool load_sgemm(int threads, MachineRates& r) {
  const nlohmann::json e = stored_entry(threads);
  const std::optional<double> g = stored_rate(e, "sgemm_gflops");
  const std::optional<ProbeStamp> at = stored_stamp(e, "sgemm_taken");
  if (!g || !at) return false;
  r.sgemm_gflops = *g, r.sgemm = *at;
  return true;
}

bool load_fma(int threads, MachineRates& r) {
  const nlohmann::json e = stored_entry(threads);
  const auto g = stored_rate(e, "fma_gflops"), a = stored_rate(e, "fma_avx2_gflops");
  const auto c = stored_rate(e, "fma_cpu_gflops"), ac = stored_rate(e, "fma_avx2_cpu_gflops");
  const std::optional<ProbeStamp> at = stored_stamp(e, "fma_taken");
  auto isa = e.find("fma_isa");
  if (!g || !a || !c || !ac || !at || isa == e.end() || !isa->is_string()) return false;
  r.fma_gflops = *g, r.fma_avx2_gflops = *a, r.fma_cpu_gflops = *c, r.fma_avx2_cpu_gflops = *ac;
  r.fma_isa = isa->get<std::string>();
  r.fma = *at;
  return true;
}

}  // namespace

MachineRates& RateCache::entry(int threads) { return rates_[threads > 0 ? threads : hardware_threads()]; }

const MachineRates& RateCache::with_sgemm(int threads) {
  threads = threads > 0 ? threads : hardware_threads();
  MachineRates& r = entry(threads);
  if (mode_ == ProbeMode::None || r.sgemm.probed()) return r;
  if (mode_ == ProbeMode::Cached && load_sgemm(threads, r)) return r;
  r.sgemm = ProbeStamp{false, utc_timestamp()};
  r.sgemm_gflops = probe_sgemm_gflops(1024, threads);
  store(threads, {{"sgemm_gflops", r.sgemm_gflops}, {"sgemm_taken", r.sgemm.taken}});
  return r;
}

const MachineRates& RateCache::with_fma(int threads) {
  threads = threads > 0 ? threads : hardware_threads();
  MachineRates& r = entry(threads);
  if (mode_ == ProbeMode::None || r.fma.probed()) return r;
  if (mode_ == ProbeMode::Cached && load_fma(threads, r)) return r;
  r.fma = ProbeStamp{false, utc_timestamp()};
  const FmaPeak fma = probe_fma_peak(threads);
  r.fma_gflops = fma.gflops, r.fma_isa = fma.isa, r.fma_avx2_gflops = fma.avx2_gflops;
  r.fma_cpu_gflops = fma.cpu_gflops, r.fma_avx2_cpu_gflops = fma.avx2_cpu_gflops;
  store(threads, {{"fma_gflops", r.fma_gflops},
                  {"fma_isa", r.fma_isa},
                  {"fma_avx2_gflops", r.fma_avx2_gflops},
                  {"fma_cpu_gflops", r.fma_cpu_gflops},
                  {"fma_avx2_cpu_gflops", r.fma_avx2_cpu_gflops},
                  {"fma_taken", r.fma.taken}});
  return r;
}

}  // namespace mha::bench
