// `mha bench --probes none|cached|fresh`: which probes a run takes, which it
// reads back from the user's cache store, what the rows say about them, and
// that every flag is refused before any probe runs. Each test gives mha a
// cache folder of its own (MHA_CACHE_DIR), so what it finds there is what the
// test put there; behaviour is read from the rows and the store, never from
// a clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/probes.h"
#include "support/test_support.h"

namespace mha {
namespace {

using test::CommandResult;

const char* kTiny = " --seq 36 --hidden 48 --heads 6 -r 2 --warmup 0 -t 1 --no-progress ";

struct Store {
  test::TempDir dir;
  std::string path() const { return dir.file("store.json"); }
  bool exists() const { return std::filesystem::exists(path()); }
  // The stored probes at `threads`, or null.
  nlohmann::json probes(int threads) const {
    if (!exists()) return nullptr;
    const nlohmann::json all = nlohmann::json::parse(test::read_text(path()));
    const std::string key = bench::probe_store_key(threads);
    return all.contains("probes") && all["probes"].contains(key) ? all["probes"][key] : nlohmann::json(nullptr);
  }
  CommandResult bench(const std::string& args) const {
    return test::run_command("MHA_CACHE_DIR=" + test::shell_quote(dir.path()) + " " + MHA_BINARY + " bench" + args);
  }
};

std::vector<nlohmann::json> jsonl(const std::string& text) {
  std::vector<nlohmann::json> rows;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

nlohmann::json one_row(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto rows = jsonl(r.out);
  EXPECT_EQ(rows.size(), 1u) << r.out;
  return rows.empty() ? nlohmann::json::object() : rows[0];
}

// cached (the default) probes and stores when the store has nothing, then
// reuses that probe; fresh probes again and replaces it.
TEST(BenchProbeStore, CachedReusesTheLastProbeAndFreshReplacesIt) {
  Store s;
  const nlohmann::json first = one_row(s.bench(std::string(kTiny) + "-o jsonl"));
  EXPECT_EQ(first["probes"], "cached");
  EXPECT_EQ(first["sgemm_probe_cached"], false) << first.dump();
  const nlohmann::json stored = s.probes(1);
  ASSERT_TRUE(stored.is_object()) << test::read_text(s.path());
  EXPECT_EQ(stored["sgemm_gflops"], first["sgemm_gflops"]);
  EXPECT_EQ(stored["sgemm_taken"], first["sgemm_probe_taken"]);

  const nlohmann::json second = one_row(s.bench(std::string(kTiny) + "-o jsonl"));
  EXPECT_EQ(second["sgemm_probe_cached"], true) << second.dump();
  EXPECT_EQ(second["sgemm_probe_taken"], first["sgemm_probe_taken"]);
  EXPECT_EQ(second["sgemm_gflops"], first["sgemm_gflops"]);

  const nlohmann::json fresh = one_row(s.bench(std::string(kTiny) + "--probes fresh -o jsonl"));
  EXPECT_EQ(fresh["probes"], "fresh");
  EXPECT_EQ(fresh["sgemm_probe_cached"], false);
  EXPECT_EQ(s.probes(1)["sgemm_gflops"], fresh["sgemm_gflops"]);
}

// A planted entry is what a cached run holds its rows to: the % of peak is
// the row's GFLOP/s over the stored rate, and the md note says where the
// rate came from and when it was taken.
TEST(BenchProbeStore, RowsAreHeldToTheStoredProbe) {
  Store s;
  nlohmann::json all;
  all["probes"][bench::probe_store_key(1)] = {{"sgemm_gflops", 12345.0}, {"sgemm_taken", "2026-01-02T03:04:05Z"}};
  test::write_text(s.path(), all.dump());
  const nlohmann::json row = one_row(s.bench(std::string(kTiny) + "-o jsonl"));
  EXPECT_EQ(row["sgemm_gflops"], 12345.0);
  EXPECT_EQ(row["sgemm_probe_taken"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(row["sgemm_probe_cached"], true);
  EXPECT_NEAR(row["sgemm_percent"].get<double>(), 100.0 * row["timing"]["gflops_cached"].get<double>() / 12345.0,
              1e-9 * row["sgemm_percent"].get<double>() + 1e-12);
  const CommandResult md = s.bench(kTiny);
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("sgemm at 1 threads: 12345.0 GFLOP/s (OpenBLAS; cached, taken 2026-01-02T03:04:05Z)"),
            std::string::npos)
      << md.out;
  // A garbled entry is probed again, not trusted.
  all["probes"][bench::probe_store_key(1)] = {{"sgemm_gflops", "fast"}, {"sgemm_taken", "2026-01-02T03:04:05Z"}};
  test::write_text(s.path(), all.dump());
  EXPECT_EQ(one_row(s.bench(std::string(kTiny) + "-o jsonl"))["sgemm_probe_cached"], false);
}

// A run probes only what its rows report: a forward row the sgemm rate (no
// FMA, no bandwidth), a decode row its own bandwidth probes (no sgemm, no
// FMA when its backend does not time its attention).
TEST(BenchProbeStore, RowsProbeOnlyWhatTheyReport) {
  Store s;
  const nlohmann::json fwd = one_row(s.bench(std::string(kTiny) + "-o jsonl"));
  for (const char* key : {"read_gbs", "fma_gflops", "fma_probe_taken", "fma_percent"})
    EXPECT_FALSE(fwd.contains(key)) << key << " in " << fwd.dump();
  EXPECT_FALSE(s.probes(1).contains("fma_gflops")) << s.probes(1).dump();

  Store d;
  const nlohmann::json tg = one_row(
      d.bench(" --hidden 48 --heads 6 -p 0 -n 2 -r 1 --warmup 0 --no-progress --probe-mib 8 --backend reference -o jsonl"));
  EXPECT_EQ(tg["test"], "tg2");
  EXPECT_GT(tg["read_gbs_before"].get<double>(), 0);
  EXPECT_GT(tg["bandwidth_percent"].get<double>(), 0);
  EXPECT_FALSE(tg.contains("sgemm_gflops")) << tg.dump();
  EXPECT_FALSE(d.exists()) << "a decode-only run stored a probe: " << test::read_text(d.path());
}

// none: no probe, no store; the % fields are left out with the reason.
TEST(BenchProbeStore, NoneProbesNothingAndSaysSo) {
  Store s;
  const nlohmann::json row = one_row(s.bench(std::string(kTiny) + "--probes none -o jsonl"));
  EXPECT_EQ(row["probes"], "none");
  EXPECT_NE(row["probes_note"].get<std::string>().find("--probes none"), std::string::npos);
  for (const char* key : {"sgemm_gflops", "sgemm_percent", "sgemm_probe_taken"})
    EXPECT_FALSE(row.contains(key)) << key << " in " << row.dump();
  EXPECT_GT(row["tokens_per_s"].get<double>(), 0);
  const nlohmann::json tg =
      one_row(s.bench(" --hidden 48 --heads 6 -p 0 -n 2 -r 1 --warmup 0 -t 1 --no-progress --probes none -o jsonl"));
  EXPECT_FALSE(tg.contains("bandwidth_percent")) << tg.dump();
  EXPECT_FALSE(tg.contains("read_gbs")) << tg.dump();
  const CommandResult md = s.bench(std::string(kTiny) + "--probes none");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("--probes none: no sgemm, FMA or bandwidth probe was taken"), std::string::npos) << md.out;
  const CommandResult csv = s.bench(std::string(kTiny) + "--probes none -o csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.out.find(",none,,,,,"), std::string::npos) << csv.out;
  EXPECT_FALSE(s.exists());
}

// Every flag is checked before any probe runs: with --probes fresh a probe
// would be stored, so an empty store shows none ran.
TEST(BenchProbeStore, FlagsAreRefusedBeforeAnyProbe) {
  Store s;
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--backend-option kernels=avx1024", "backend.kernels: expected"},
           {"--backend-option threads=-2", "backend.threads"},
           {"-p 8 --kv-cache ''", "--kv-cache: expected a value, found ''"},
           {"--seq ''", "--seq: expected a value, found ''"},
           {"--probes sometimes", "--probes: expected none, cached or fresh, found 'sometimes'"},
           {"--variant no_such_variant", "--variant: unknown variant 'no_such_variant'"},
       }) {
    const bool probes_flag = args.find("--probes") != std::string::npos;
    const CommandResult r = s.bench(" --no-progress -r 1 " + args + (probes_flag ? "" : " --probes fresh"));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_FALSE(s.exists()) << args << ": probed before refusing";
  }
}

}  // namespace
}  // namespace mha
