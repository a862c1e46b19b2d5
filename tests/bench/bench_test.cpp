// `mha bench`: llama-bench flags, row metadata, per-row peak memory, the
// bandwidth probe and the KV-cache phases (on a test backend whose session
// only keeps counts, so the machinery is tested whatever backends decode).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/peak_memory.h"
#include "bench/phases.h"
#include "bench/probes.h"
#include "run/decode_error.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

using test::CommandResult;
using test::run_mha;

// "2026-11-22T23:45:01Z" (UTC, ISO 8601, seconds). No std::regex: GCC 12
// warns inside <regex> under the sanitizer build.
bool is_iso_utc(const std::string& s) {
  if (s.size() != 20) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char want = i == 4 || i == 7 ? '-' : i == 10 ? 'T' : i == 13 || i == 16 ? ':' : i == 19 ? 'Z' : '0';
    if (want == '0' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != want) return false;
  }
  return true;
}

// A CSV line holds ",<timestamp>," somewhere.
bool has_iso_field(const std::string& line) {
  for (std::size_t i = 0; i + 22 <= line.size(); ++i)
    if (line[i] == ',' && line[i + 21] == ',' && is_iso_utc(line.substr(i + 1, 20))) return true;
  return false;
}

void expect_one_line_exit2(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(BenchFlags, BadListsAreOneLineAndExit2) {
  const std::string tiny = "bench --no-progress --probe-mib 16 --hidden 16 --heads 2 -r 1 --warmup 0 ";
  expect_one_line_exit2(run_mha(tiny + "-p 8,x"), "-p/--n-prompt: expected a comma list of non-negative integers, found 'x'");
  expect_one_line_exit2(run_mha(tiny + "-p 8,,16"), "-p/--n-prompt: expected a comma list of non-negative integers, found ''");
  expect_one_line_exit2(run_mha(tiny + "-n -3"), "-n/--n-gen: expected a comma list of non-negative integers, found '-3'");
  expect_one_line_exit2(run_mha(tiny + "-n 2 -d 1.5"), "-d/--n-depth: expected a comma list of non-negative integers, found '1.5'");
  expect_one_line_exit2(run_mha(tiny + "-p 8 -t 0"), "-t/--threads: expected a comma list of positive integers, found '0'");
  expect_one_line_exit2(run_mha(tiny + "-p 8 -t 2000"), "-t/--threads: expected at most 1024 threads, found 2000");
  expect_one_line_exit2(run_mha(tiny + "-p 8 -t 1 --backend reference --backend-option bogus=1"), "backend.bogus");
  expect_one_line_exit2(run_mha("bench --no-progress -p 8 --probe-mib 70000"), "--probe-mib: expected at most 65536, found 70000");
  expect_one_line_exit2(run_mha(tiny + "-t 2,"), "-t/--threads: expected a comma list of positive integers, found ''");
  expect_one_line_exit2(run_mha(tiny + "-p 0 -n 0"), "-p/-n: every size is 0, nothing to run");
  expect_one_line_exit2(run_mha(tiny + "-p 8 --seq 8"), "--seq: not used with -p/-n/-d");
  expect_one_line_exit2(run_mha(tiny + "-p 8 --kv-cache float32,fp8"),
                        "--kv-cache: expected a comma list of float32, float16, bfloat16, q8_0, q4_0, bfloat8_b, bfloat4_b, found 'fp8'");
  expect_one_line_exit2(run_mha(tiny + "-n 2 --kv-cache q4_0"), "cache_dtype q4_0 needs head widths divisible by 32, found head_dim 8");
  expect_one_line_exit2(run_mha(tiny + "-p 8 --kv-heads 3"), "--heads 2 is not a multiple of --kv-heads 3");
  expect_one_line_exit2(run_mha(tiny + "--variant ,torch_mha"), "--variant: empty item");
}

// -t on a backend without a threads option skips its rows, not the sweep.
TEST(BenchFlags, ThreadsOnABackendWithoutThemSkipsItsRows) {
  CommandResult r = run_mha("bench --no-progress --probe-mib 16 --hidden 16 --heads 2 -r 1 --warmup 0 -p 8 -n 0 -t 1 "
                            "--backend reference,cpu -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream lines(r.out);
  std::string a, b;
  std::getline(lines, a), std::getline(lines, b);
  EXPECT_NE(nlohmann::json::parse(a).value("skipped", "").find("-t: backend.threads: unknown key"), std::string::npos) << a;
  EXPECT_FALSE(nlohmann::json::parse(b).contains("skipped")) << b;
}

TEST(BenchFlags, SuiteTestKeys) {
  bench::Row r;
  EXPECT_THROW(bench::parse_test("pp", r, "x"), InputError);
  EXPECT_THROW(bench::parse_test("tg0", r, "x"), InputError);
  EXPECT_THROW(bench::parse_test("pp12a", r, "x"), InputError);
  bench::parse_test("tg128", r, "x");
  EXPECT_EQ(r.phase, bench::Phase::Generate);
  EXPECT_EQ(r.seq, 128);
  auto rows = bench::parse_suite(ordered_json::parse(R"([{"test": "pp64", "depth": 32, "threads": 1,
      "cache_dtype": "bfloat16"}])"), "s.json");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].phase, bench::Phase::Prefill);
  EXPECT_EQ(rows[0].depth, 32);
  EXPECT_EQ(rows[0].threads, 1);
  EXPECT_EQ(rows[0].cache_dtype, CacheDtype::Bfloat16);
  EXPECT_THROW(bench::parse_suite(ordered_json::parse(R"([{"depth": 3}])"), "s.json"), InputError);
}

// Every row of every machine format says where and how it ran, skipped rows
// too (tg rows skip on backends without decode).
TEST(BenchOutput, EveryRowCarriesItsMetadata) {
  const std::string args = "bench --no-progress --probe-mib 16 --hidden 16 --heads 2 -r 2 --warmup 0 -p 8 -n 2 -t 1";
  auto check = [&](const nlohmann::json& row) {
    for (const char* key : {"build", "cpu", "simd", "threads", "timestamp", "backend_options", "test", "depth"})
      EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
    EXPECT_FALSE(row["build"].get<std::string>().empty());
    EXPECT_NE(row["cpu"], "");
    EXPECT_TRUE(is_iso_utc(row["timestamp"].get<std::string>())) << row["timestamp"];
    EXPECT_EQ(row["threads"], 1);
    EXPECT_EQ(row["backend_options"], nlohmann::json({{"threads", 1}}));
    if (!row.contains("skipped")) {
      EXPECT_GT(row["tokens_per_s"].get<double>(), 0);
      EXPECT_TRUE(row.contains("tokens_per_s_sd"));
      EXPECT_GT(row["peak_mib"].get<double>(), 0);
      EXPECT_EQ(row["probes"], "cached");
      EXPECT_NE(row["simd"], "unknown");
      if (row["phase"] == "generate") {  // the cpu backend's KV cache, end to end
        EXPECT_GT(row["bandwidth_percent"].get<double>(), 0);
        EXPECT_GT(row["read_gbs"].get<double>(), 0);  // its own probes, not the sgemm one
        EXPECT_FALSE(row.contains("sgemm_gflops")) << row.dump();
        EXPECT_GT(row["bytes_per_token"].get<double>(), 4.0 * 4 * 16 * 16);  // more than q, k, v, o weights
        // float32 cache on the cpu: float32 arithmetic against float64, not zero, well inside 1e-4
        EXPECT_GT(row["cache_rel_l2_err"].get<double>(), 0);
        EXPECT_LT(row["cache_rel_l2_err"].get<double>(), 1e-4);
        EXPECT_LE(row["cache_max_abs_err"].get<double>(), 1e-4);
      } else {
        EXPECT_GT(row["sgemm_percent"].get<double>(), 0);
        EXPECT_TRUE(is_iso_utc(row["sgemm_probe_taken"].get<std::string>())) << row.dump();
        EXPECT_FALSE(row.contains("read_gbs")) << row.dump();  // no bandwidth probe for a prefill row
      }
    }
  };
  CommandResult r = run_mha(args + " -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["test"], "pp8");
  EXPECT_EQ(doc["rows"][1]["test"], "tg2");
  for (const auto& row : doc["rows"]) check(row);

  r = run_mha(args + " -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) check(nlohmann::json::parse(line)), ++n;
  EXPECT_EQ(n, 2);

  r = run_mha(args + " -o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream csv(r.out);
  std::getline(csv, line);
  for (const char* col : {",threads,", ",tokens_per_s,", ",tokens_per_s_sd,", ",build,", ",cpu,", ",simd,",
                          ",timestamp,", ",backend_options,", ",peak_mib,", ",bandwidth_percent,"})
    EXPECT_NE(line.find(col), std::string::npos) << col << " in " << line;
  const std::string header = line;
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_NE(line.find(",\"{\"\"threads\"\":1}\","), std::string::npos) << line;  // options, CSV-quoted
    EXPECT_TRUE(has_iso_field(line)) << line;
  }
  EXPECT_EQ(rows, 2);
}

// --kv-cache sweeps like -t: one tg row per dtype, each with its error
// against float64, which grows as the format narrows.
TEST(BenchOutput, KvCacheListSweepsDtypesWithTheirErrors) {
  CommandResult r = run_mha("bench --no-progress --probe-mib 16 --hidden 128 --heads 4 --kv-heads 2 -r 1 --warmup 0 "
                            "-p 0 -n 2 -d 40 -t 1 --kv-cache float32,bfloat16,q8_0,q4_0 -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream lines(r.out);
  std::string line;
  std::vector<std::pair<std::string, double>> err;
  while (std::getline(lines, line)) {
    const auto row = nlohmann::json::parse(line);
    err.push_back({row["cache_dtype"], row["cache_rel_l2_err"].get<double>()});
  }
  ASSERT_EQ(err.size(), 4u);
  EXPECT_EQ(err[0].first, "float32");
  EXPECT_EQ(err[3].first, "q4_0");
  EXPECT_LT(err[0].second, err[1].second);  // float32 < bfloat16
  EXPECT_LT(err[2].second, err[3].second);  // q8_0 < q4_0
  EXPECT_LT(err[3].second, 0.5);
}

TEST(BenchProbes, ReadBandwidthIsPositive) {
  EXPECT_GT(bench::probe_read_bandwidth_gbs(1, 8 << 20), 0.0);
  EXPECT_GT(bench::probe_read_bandwidth_gbs(2, 8 << 20), 0.0);
  EXPECT_GT(bench::probe_read_bandwidth_gbs(3, 1000), 0.0);  // smaller than one block per thread
  EXPECT_GT(bench::probe_sgemm_gflops(64, 1), 0.0);
}

// A KV-cache session that computes nothing: it allocates and touches its
// whole cache up front (as a serving engine preallocates), counts what it
// is asked, and returns zeros of the right shape.
struct Counts {
  int sessions = 0;
  std::vector<int64_t> append_rows;
};

class CountingSession : public DecodeSession {
 public:
  CountingSession(const AttentionSpec& spec, const DecodeOptions& opt, Counts& c)
      : out_dim_(spec.out_dim()), row_bytes_(2 * 4 * spec.num_kv_heads * spec.head_dim * opt.batch), counts_(c),
        cache_(static_cast<size_t>(row_bytes_ * opt.max_tokens), 1) {}
  Tensor append(const Tensor& x) override {
    counts_.append_rows.push_back(x.dim(1));
    len_ += x.dim(1);
    return Tensor(DType::F32, {x.dim(0), x.dim(1), out_dim_});
  }
  void fill_synthetic(int64_t n, uint64_t) override {
    counts_.append_rows.push_back(-n);  // negative: filled, not appended
    len_ += n;
  }
  int64_t length() const override { return len_; }
  int64_t cache_bytes() const override { return len_ * row_bytes_; }

 private:
  int64_t out_dim_, row_bytes_, len_ = 0;
  Counts& counts_;
  std::vector<uint8_t> cache_;
};

class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Counts& c) : counts_(c) {}
  std::string name() const override { return "counting"; }
  AttentionResult run(const AttentionSpec&, const AttentionInputs&, const RunOptions&) override {
    throw std::logic_error("not used");
  }
  nlohmann::json describe() const override { return {{"threads", 1}, {"simd", "none"}}; }
  std::optional<std::string> supports_decode(const AttentionSpec&) const override { return std::nullopt; }
  std::unique_ptr<DecodeSession> start_decode(const AttentionSpec& spec, const DecodeOptions& opt) override {
    ++counts_.sessions;
    return std::make_unique<CountingSession>(spec, opt, counts_);
  }

 private:
  Counts& counts_;
};

bench::BackendFactory counting(Counts& c) {
  return [&c](const bench::Row&, const nlohmann::ordered_json&) { return std::make_unique<CountingBackend>(c); };
}

bench::Row llama_row(bench::Phase phase, int64_t tokens, int64_t depth) {
  bench::Row r;
  r.variant = "llama_attention";
  r.phase = phase, r.seq = tokens, r.depth = depth, r.causal = true;
  r.hidden = 64, r.heads = 4, r.kv_heads = 2;
  return r;
}

TEST(BenchPhases, GenerateRowsRunFreshSessionsAndCountBytesRead) {
  Counts c;
  bench::RateCache rates(8 << 20);
  bench::Result res = bench::run_row(llama_row(bench::Phase::Generate, 3, 5), 1, 2, rates, counting(c));
  ASSERT_EQ(res.skipped, "");
  // One cold run, one warm-up, two timed: each a fresh session, the depth
  // filled (not prefilled), then three single-token steps; then, untimed,
  // the error check's own session: the depth and kErrorTokens (2) steps.
  EXPECT_EQ(c.sessions, 5);
  EXPECT_EQ(c.append_rows,
            (std::vector<int64_t>{-5, 1, 1, 1, -5, 1, 1, 1, -5, 1, 1, 1, -5, 1, 1, 1, -5, 1, 1}));
  ASSERT_TRUE(res.cache_error.has_value());
  EXPECT_EQ(res.cache_error->rows, bench::kErrorTokens);
  EXPECT_EQ(res.timing.cached_ms.size(), 2u);
  EXPECT_EQ(res.row.test(), "tg3");
  // llama_attention 64 wide, 4 heads of 16, 2 kv heads: q, k, v, o weights
  // 64x64 + 2 x 32x64 + 64x64 floats; the cache holds 2 x 2 x 16 floats a token
  // and after the steps it holds 6, 7, 8 tokens.
  const double weights = 4.0 * (64 * 64 + 2 * 32 * 64 + 64 * 64), row = 2 * 4 * 2 * 16;
  EXPECT_DOUBLE_EQ(res.bytes_per_token, weights + row * (6 + 7 + 8) / 3.0);
  EXPECT_GT(res.bandwidth_percent, 0);
  // Its bandwidth is the better of two fresh probes on either side of the
  // timed runs, and the percent is held to that one.
  EXPECT_GT(res.read_gbs_before, 0);
  EXPECT_GT(res.read_gbs_after, 0);
  EXPECT_EQ(res.rates.read_gbs, std::max(res.read_gbs_before, res.read_gbs_after));
  EXPECT_NEAR(res.bandwidth_percent,
              100.0 * res.bytes_per_token * 3 / (res.timing.median_ms / 1e3) / (res.rates.read_gbs * 1e9),
              1e-9 * res.bandwidth_percent);
  EXPECT_GT(res.tokens_per_s, 0);
  EXPECT_EQ(res.sgemm_percent, 0);
  // Projections (q, k, v, o) and attention over 6, 7, 8 keys, per step.
  const double proj = 64 * 64 + 2 * 32 * 64 + 64 * 64;
  EXPECT_DOUBLE_EQ(res.timing.flops, 2.0 * (3 * proj + 4 * (6 + 7 + 8) * 32));
  EXPECT_EQ(res.threads, 1);
  EXPECT_EQ(res.simd, "none");
}

TEST(BenchPhases, PrefillAtDepthIsOneAppendAfterTheFilledDepth) {
  Counts c;
  bench::RateCache rates(8 << 20);
  bench::Result res = bench::run_row(llama_row(bench::Phase::Prefill, 4, 3), 0, 1, rates, counting(c));
  ASSERT_EQ(res.skipped, "");
  EXPECT_EQ(c.append_rows, (std::vector<int64_t>{-3, 4, -3, 4}));
  EXPECT_GT(res.sgemm_percent, 0);
  EXPECT_EQ(res.bandwidth_percent, 0);
  EXPECT_EQ(res.read_gbs_before, 0);  // only decode rows re-probe the bandwidth
}

// tt-sim decodes only through its SDPA path, which needs whole-tile heads:
// this row's 16-wide heads are skipped with that reason.
TEST(BenchPhases, BackendsThatCannotDecodeSkipTheRowWithTheirReason) {
  bench::RateCache rates(8 << 20);
  bench::Row r = llama_row(bench::Phase::Generate, 2, 0);
  bench::Result res = bench::run_row(r, 0, 1, rates, [](const bench::Row&, const nlohmann::ordered_json& o) {
    return make_backend("tt-sim", o, "backend");
  });
  EXPECT_NE(res.skipped.find("head_dim that is a multiple of 32"), std::string::npos) << res.skipped;
}

// The peak is reset before each row: a row that allocates little after one
// that allocated a lot reports less.
TEST(BenchPeakMemory, ResetPerRow) {
  if (!bench::reset_peak_memory()) GTEST_SKIP() << "/proc/self/clear_refs refused: rows report the process peak";
  Counts c;
  bench::RateCache rates(1 << 20);
  bench::Row big = llama_row(bench::Phase::Generate, 1, 1);
  big.hidden = 512, big.heads = 4, big.kv_heads = 4;
  big.depth = 1 << 15;  // the session's cache: 32768 tokens x 2 x 512 floats = 128 MiB
  bench::Row small = llama_row(bench::Phase::Generate, 1, 1);
  bench::Result a = bench::run_row(big, 0, 1, rates, counting(c));
  bench::Result b = bench::run_row(small, 0, 1, rates, counting(c));
  ASSERT_TRUE(a.peak_per_row && b.peak_per_row);
  EXPECT_GT(a.peak_mib, b.peak_mib + 100) << a.peak_mib << " then " << b.peak_mib;
}

}  // namespace
}  // namespace mha

namespace mha {
namespace {

bool is_png(const std::string& path) {
  std::string head = test::read_text(path).substr(0, 8);
  return head == std::string("\x89PNG\r\n\x1a\n", 8);
}

std::string script(const char* name) { return test::shell_quote(test::source_dir() + "/scripts/" + name); }

// Both plot scripts on small real output: a bench sweep (forward, pp and,
// from the counting backend, tg rows with their bandwidth bound) and the
// attention weights of the llama_attention example config.
TEST(PlotScripts, DrawSmallBenchOutputAndAttentionWeights) {
  test::TempDir dir;
  const std::string json = dir.file("sweep.json"), jsonl = dir.file("sweep.jsonl");
  CommandResult r = run_mha("bench --no-progress --probe-mib 16 --hidden 16 --heads 2 -r 2 --warmup 0 -p 8,16 -n 0 -d 0 -t 1 "
                            "-o json --output " + test::shell_quote(json));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command("/usr/bin/python3 " + script("plot_bench.py") + " " + test::shell_quote(json) + " -o " +
                        test::shell_quote(dir.file("pp.png")));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(is_png(dir.file("pp.png")));

  Counts c;
  bench::RateCache rates(8 << 20);
  std::vector<bench::Result> results;
  for (int64_t depth : {0, 8, 32}) results.push_back(bench::run_row(llama_row(bench::Phase::Generate, 4, depth), 0, 2, rates, counting(c)));
  test::write_text(jsonl, bench::format_table(results, "jsonl"));
  r = test::run_command("/usr/bin/python3 " + script("plot_bench.py") + " " + test::shell_quote(jsonl) + " -o " +
                        test::shell_quote(dir.file("tg.png")));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(is_png(dir.file("tg.png")));

  const std::string w = dir.file("w.npy");
  r = run_mha("run --config " + test::shell_quote(test::source_dir() + "/configs/llama_attention.json") +
              " --attn-weights " + test::shell_quote(w));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_command("/usr/bin/python3 " + script("plot_attention.py") + " " + test::shell_quote(w) +
                        " --batch 1 --heads 0,3 -o " + test::shell_quote(dir.file("heads.png")));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(is_png(dir.file("heads.png")));

  // MHA_KEEP_PLOTS=DIR keeps the pictures to look at.
  if (const char* keep = std::getenv("MHA_KEEP_PLOTS"))
    test::run_command("cp " + test::shell_quote(dir.path()) + "/*.png " + test::shell_quote(keep));

  // Bad input: one line, exit 2, no picture.
  r = test::run_command("/usr/bin/python3 " + script("plot_attention.py") + " " + test::shell_quote(w) +
                        " --heads 9 -o " + test::shell_quote(dir.file("bad.png")));
  expect_one_line_exit2(r, "--heads: head 9 not in 0..7");
  r = test::run_command("/usr/bin/python3 " + script("plot_bench.py") + " " + test::shell_quote(w) + " -o " +
                        test::shell_quote(dir.file("bad.png")));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace mha

namespace mha {
namespace {

// The float64 reference behind the cache-error figures is bounded in
// memory and work: a Llama-3-8B layer's 2 error steps at depth 32768 fit,
// at depth 1048576 its cache does not, and a 16384- or 4096-token prompt's
// attention (quadratic) is refused on work unless a window bounds it.
TEST(DecodeError, ReferenceCostIsBounded) {
  AttentionSpec s;
  s.num_heads = 32, s.num_kv_heads = 8, s.head_dim = s.head_dim_v = 128;
  EXPECT_FALSE(decode_error_too_costly(s, 1, 32768, bench::kErrorTokens));
  EXPECT_EQ(decode_error_too_costly(s, 1, 1048576, 2).value_or(""),
            "float64 reference would hold 17.2 GB of cache (limit 4.3 GB)");
  // 2 x 32 heads x (1 + ... + 16384 keys) x 256 = 2.1992e12
  EXPECT_EQ(decode_error_too_costly(s, 1, 0, 16384).value_or(""),
            "float64 reference would cost 2199.2 GFLOP of attention (limit 8.0)");
  EXPECT_TRUE(decode_error_too_costly(s, 1, 0, 4096));
  s.window = 64;  // a sliding window bounds the keys per row: 4096 rows x <= 64 keys
  EXPECT_FALSE(decode_error_too_costly(s, 1, 0, 4096));
}

}  // namespace
}  // namespace mha
