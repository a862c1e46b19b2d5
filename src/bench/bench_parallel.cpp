#include "bench/bench_parallel.h"

#include <algorithm>
#include <cstring>

#include "util/build_info.h"
#include "bench/peak_memory.h"
#include "parallel/world.h"
#include "parallel/driver.h"
#include "run/passes.h"
#include "util/error.h"

namespace mha::bench {

namespace {

enum Command : int64_t { kStop = 0, kRow = 1, kDone = 2 };

// What each rank measured over one parallel row.
struct RankStats {
  double peak_mib = 0;
  int64_t bytes_sent = 0;
};

// Every rank's stats, in rank order, on rank 0 (the others get none).
std::vector<RankStats> gather_stats(const RankStats& mine) {
  const std::string all = parallel::gather_bytes(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  std::vector<RankStats> out(all.size() / sizeof(RankStats));
  if (!out.empty()) std::memcpy(out.data(), all.data(), out.size() * sizeof(RankStats));
  return out;
}

}  // namespace

RankCommands::~RankCommands() {
  // Inside a row the workers learn of a failure from the row's own
  // agreement (WorkerRelease, collectively) and have already left.
  if (!finished_ && !in_row_)
    for (int r = 1; r < parallel::size(); ++r) parallel::send_int(kStop, r);
}

void RankCommands::run_row() {
  for (int r = 1; r < parallel::size(); ++r) parallel::send_int(kRow, r);
  in_row_ = true;
}

void RankCommands::row_done() { in_row_ = false; }

void RankCommands::finish() {
  if (finished_ || in_row_) return;
  for (int r = 1; r < parallel::size(); ++r) parallel::send_int(kDone, r);
  finished_ = true;
}

std::vector<Result> run_parallel_row(const Row& row, ParallelConfig::Mode mode, int64_t warmup, int64_t repetitions,
                                     RateCache& rates, RankCommands& ranks) {
  const int N = parallel::size();
  const int t = row.threads;
  Row one = row;
  if (t > 0) one.threads = N * t;
  Result base = run_row(one, warmup, repetitions, rates);
  ParallelStats bs;
  bs.ranks = 1;
  bs.threads_per_rank = base.threads;
  bs.passes = pass_count(warmup, repetitions);
  bs.bytes_sent_per_rank = {0};
  bs.peak_mib_max = base.peak_mib;
  base.parallel = bs;

  Result res;
  res.row = row;
  res.timestamp = utc_timestamp();
  res.probes = rates.mode();
  ParallelStats ps;
  ps.mode = mode;
  ps.ranks = N;
  ps.baseline_threads = base.threads;
  if (!base.skipped.empty()) {  // the same row split across ranks cannot run either
    res.skipped = base.skipped;
    res.parallel = ps;
    return {base, res};
  }
  PreparedRun run;
  if (std::string why = prepare_forward(row, run); !why.empty()) throw InputError(why);  // base would have skipped
  run.config.backend = row.backend;
  run.config.backend_options = row.effective_backend_options();
  run.config.parallel = ParallelConfig{mode, N};
  std::unique_ptr<Backend> backend = make_backend(row.backend, run.config.backend_options, "backend");
  const nlohmann::json info = backend->describe();
  res.threads = backend->threads();
  res.simd = info.contains("simd") && info["simd"].is_string() ? info["simd"].get<std::string>() : "unknown";
  res.rates = rates.with_sgemm(res.threads);  // probed on rank 0 while the others wait

  RunRequest req;
  req.warmup = warmup;
  req.iterations = repetitions;
  ranks.run_row();
  const int64_t sent0 = parallel::bytes_sent();
  res.peak_per_row = reset_peak_memory();
  RunReport rep;
  {
    parallel::WorkerRelease release;
    rep = drive_run(run, *backend, req, release);
  }
  res.peak_mib = peak_memory_mib();
  const std::vector<RankStats> all = gather_stats({res.peak_mib, parallel::bytes_sent() - sent0});
  ranks.row_done();
  res.timing = rep.timing;
  ps.threads_per_rank = res.threads;
  ps.passes = pass_count(warmup, repetitions);
  for (const RankStats& s : all) {
    ps.bytes_sent_per_rank.push_back(s.bytes_sent);
    ps.peak_mib_max = std::max(ps.peak_mib_max, s.peak_mib);
  }
  ps.baseline_median_ms = base.timing.median_ms;
  if (res.timing.median_ms > 0) ps.efficiency_percent = 100.0 * base.timing.median_ms / res.timing.median_ms;
  res.parallel = ps;
  // tokens/s and % of the sgemm rate as run_row gives them, the rate being
  // N ranks' worth of rank 0's probe at the threads of one rank.
  tokens_per_second(res, static_cast<double>(row.batch * row.seq));
  if (res.rates.sgemm_gflops > 0) res.sgemm_percent = 100.0 * res.timing.gflops_cached() / (N * res.rates.sgemm_gflops);
  return {base, res};
}

int serve_bench() {
  for (;;) {
    const int64_t cmd = parallel::recv_int_idle(0);
    if (cmd == kStop) return 2;
    if (cmd == kDone) return 0;
    const int64_t sent0 = parallel::bytes_sent();
    reset_peak_memory();
    if (const int code = serve_rank(); code != 0) return code;
    gather_stats({peak_memory_mib(), parallel::bytes_sent() - sent0});
  }
}

}  // namespace mha::bench
