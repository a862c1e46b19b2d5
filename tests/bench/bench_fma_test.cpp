// The FMA-peak probe (bench/fma_peak.h) and the attention split of pp rows:
// rows on a KV session that times its attention (the cpu backend's) carry
// attention_ms, attention_gflops = attention FLOPs / that time, and its
// share of the FMA peak probed at the row's thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench.h"
#include "bench/fma_peak.h"
#include "bench/phases.h"
#include "model/attention.h"
#include "vec/isa.h"
#include "support/test_support.h"

namespace mha {
namespace {

TEST(BenchFma, ProbeRunsTheWidestIsaAndCountsItsFlops) {
  const bench::FmaPeak one = bench::probe_fma_peak(1), two = bench::probe_fma_peak(2);
  EXPECT_GT(one.gflops, 0.0);
  EXPECT_GT(two.gflops, 0.0);
  EXPECT_EQ(std::string(one.isa), vec::cpu_supports(vec::Isa::Avx512) ? "avx512" : "avx2");
  EXPECT_GT(one.avx2_gflops, 0.0);
  EXPECT_GT(one.cpu_gflops, 0.0);
  EXPECT_GT(two.avx2_cpu_gflops, 0.0);
  if (!vec::cpu_supports(vec::Isa::Avx512)) {
    EXPECT_EQ(one.avx2_gflops, one.gflops);
  }
  // 12 accumulators of 8 lanes, 2 FLOPs per lane per FMA.
  EXPECT_DOUBLE_EQ(bench::fma_loop_avx2(1000), 2.0 * 8 * 12 * 1000);
  if (vec::cpu_supports(vec::Isa::Avx512)) {
    EXPECT_DOUBLE_EQ(bench::fma_loop_avx512(1000), 2.0 * 16 * 16 * 1000);
  }
}

TEST(BenchFma, AttentionFlopsAreTheKeysEachRowSees) {
  AttentionSpec s;
  s.num_heads = 4, s.num_kv_heads = 2, s.head_dim = 16, s.head_dim_v = 8;
  // Rows at positions 10, 11, 12 see 11, 12, 13 keys.
  EXPECT_DOUBLE_EQ(bench::append_attention_flops(s, 2, 10, 3), 2.0 * 2 * 4 * (11 + 12 + 13) * 24);
  s.window = 12;  // capped at 12 keys
  EXPECT_DOUBLE_EQ(bench::append_attention_flops(s, 1, 10, 3), 2.0 * 4 * (11 + 12 + 12) * 24);
}

bench::Row pp_row(int64_t depth, bool session) {
  bench::Row r;
  r.variant = "llama_attention";
  r.phase = bench::Phase::Prefill, r.seq = 40, r.depth = depth, r.causal = true;
  r.hidden = 64, r.heads = 4, r.kv_heads = 2, r.threads = 1;
  r.prefill_session = session;
  return r;
}

TEST(BenchFma, PrefillRowsOnASessionReportTheirAttention) {
  bench::RateCache rates(8 << 20);
  const bench::Result deep = bench::run_row(pp_row(30, false), 0, 3, rates);
  ASSERT_EQ(deep.skipped, "");
  ASSERT_GT(deep.attention_ms, 0.0);
  // Each timed run's attention is timed inside that run, on the same clock
  // (bench/phases.cpp), and both medians are over the same runs: a median
  // keeps a run-by-run order, so this holds however loaded the machine is.
  EXPECT_LE(deep.attention_ms, deep.timing.median_ms);
  AttentionSpec s;
  s.num_heads = 4, s.num_kv_heads = 2, s.head_dim = s.head_dim_v = 16;
  EXPECT_DOUBLE_EQ(deep.attention_gflops, bench::append_attention_flops(s, 1, 30, 40) / (deep.attention_ms * 1e6));
  EXPECT_GT(deep.rates.fma_gflops, 0.0);
  EXPECT_DOUBLE_EQ(deep.fma_percent, 100.0 * deep.attention_gflops / deep.rates.fma_gflops);
  ASSERT_GT(deep.attention_cpu_ms, 0.0);  // one thread: at most about the wall time
  EXPECT_GT(deep.rates.fma_cpu_gflops, 0.0);
  EXPECT_DOUBLE_EQ(deep.fma_cpu_percent, 100.0 * bench::append_attention_flops(s, 1, 30, 40) /
                                             (deep.attention_cpu_ms * 1e6) / deep.rates.fma_cpu_gflops);

  // Depth 0: one forward pass (Backend::run), no split, unless asked.
  const bench::Result flat = bench::run_row(pp_row(0, false), 0, 1, rates);
  EXPECT_LT(flat.attention_ms, 0.0);
  const bench::Result split = bench::run_row(pp_row(0, true), 0, 1, rates);
  EXPECT_GT(split.attention_ms, 0.0);
  EXPECT_DOUBLE_EQ(split.timing.flops, flat.timing.flops);

  // The AVX2 kernels forced: held to the AVX2 loop's peak.
  bench::Row narrow = pp_row(30, false);
  narrow.backend_options = {{"kernels", "avx2"}};
  const bench::Result n = bench::run_row(narrow, 0, 1, rates);
  ASSERT_GT(n.attention_ms, 0.0);
  EXPECT_DOUBLE_EQ(n.fma_percent, 100.0 * n.attention_gflops / n.rates.fma_avx2_gflops);

  const std::string csv = bench::format_table({deep, flat}, "csv");
  EXPECT_NE(csv.find(",fma_gflops,attention_ms,attention_gflops,fma_percent,fma_cpu_gflops,attention_cpu_ms,"
                     "fma_cpu_percent,"),
            std::string::npos);
  const std::string md = bench::format_table({deep}, "md");
  EXPECT_NE(md.find(" fma |"), std::string::npos) << md;
  EXPECT_NE(md.find("fma peak at 1 threads: "), std::string::npos) << md;
  EXPECT_NE(bench::result_json(deep).dump().find("\"fma_percent\""), std::string::npos);
  EXPECT_EQ(bench::result_json(flat).dump().find("\"fma_percent\""), std::string::npos);
}

// End to end through the binary: the flags' errors are one line, exit 2;
// a tiny sweep prints the attention's share on pp rows at depth and with
// --pp-session at depth 0, and the AVX2 kernels when asked.
TEST(BenchFma, CliFlags) {
  const std::string tiny = "bench --no-progress --probe-mib 8 --hidden 32 --heads 4 --kv-heads 2 -r 1 --warmup 0 ";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--seq 8 --pp-session", "--pp-session: only for -p/-n/-d rows"},
           {"-p 8 --backend-option kernels=sse", "backend.kernels: expected \"auto\", \"avx512\" or \"avx2\""}}) {
    const test::CommandResult r = test::run_mha(tiny + args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const test::CommandResult r = test::run_mha(tiny + "-p 20 -n 0 -d 0,7 -t 1 --pp-session --backend-option kernels=avx2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::size_t rows = 0;
  for (std::size_t at = r.out.find(" pp20 "); at != std::string::npos; at = r.out.find(" pp20 ", at + 1)) ++rows;
  EXPECT_EQ(rows, 2u) << r.out;
  std::size_t fma = 0;
  for (std::size_t at = r.out.find(" fma |"); at != std::string::npos; at = r.out.find(" fma |", at + 1)) ++fma;
  EXPECT_EQ(fma, 2u) << r.out;  // both rows, depth 0 through the session
  EXPECT_NE(r.out.find("fma peak at 1 threads: "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha
