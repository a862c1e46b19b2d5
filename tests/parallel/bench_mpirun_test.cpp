// `mpirun -np N mha bench --parallel heads|sequence` end to end (1 to 3
// ranks, oversubscribed: the rows' fields, not their speed): each sweep row
// gives a one-process baseline row and a row across the ranks that carries
// ranks, threads per rank, mode, timing, efficiency against the baseline,
// bytes sent per rank and peak memory; bad flags and rows that do not split
// end every rank with one line and exit 2, never a hang.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "mpirun_support.h"
#include "parallel/world.h"
#include "support/test_support.h"

namespace mha {
namespace {

using test::mpirun;

// --probes none: these tests check the rows' fields, not the % of peak, so
// they take no sgemm probe (which cost each mpirun run seconds).
const char* kShape = " --seq 36 --hidden 48 --heads 6 -r 2 --warmup 0 --no-progress --probes none ";

std::vector<nlohmann::json> jsonl(const std::string& text) {
  std::vector<nlohmann::json> rows;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// The baseline row `b` and the row `p` across `ranks` ranks with `t` threads each.
void check_pair(const nlohmann::json& b, const nlohmann::json& p, const std::string& mode, int ranks, int t,
                const std::string& what) {
  EXPECT_EQ(b["mode"], "one-process") << what;
  EXPECT_EQ(b["ranks"], 1) << what;
  EXPECT_EQ(b["threads_per_rank"], ranks * t) << what;
  EXPECT_EQ(b["threads"], ranks * t) << what;
  EXPECT_FALSE(b.contains("efficiency_percent")) << what;
  EXPECT_EQ(p["mode"], mode) << what;
  EXPECT_EQ(p["ranks"], ranks) << what;
  EXPECT_EQ(p["threads_per_rank"], t) << what;
  EXPECT_EQ(p["threads"], t) << what;
  EXPECT_EQ(p["seq"], b["seq"]) << what;
  EXPECT_EQ(p["causal"], b["causal"]) << what;
  EXPECT_EQ(p["passes"], 3) << what;  // first + 2 timed
  EXPECT_EQ(p["timing"]["cached_ms"].size(), 2u) << what;
  const double median = p["timing"]["median_ms"].get<double>();
  EXPECT_GT(median, 0) << what;
  EXPECT_GE(p["timing"]["stddev_ms"].get<double>(), 0) << what;
  EXPECT_EQ(p["baseline_median_ms"], b["timing"]["median_ms"]) << what;
  EXPECT_EQ(p["baseline_threads"], ranks * t) << what;
  EXPECT_NEAR(p["efficiency_percent"].get<double>(), 100.0 * b["timing"]["median_ms"].get<double>() / median, 1e-9)
      << what;
  const auto& bytes = p["bytes_sent_per_rank"];
  ASSERT_EQ(bytes.size(), static_cast<std::size_t>(ranks)) << what;
  int64_t most = 0;
  for (const auto& v : bytes) {
    if (ranks > 1) EXPECT_GT(v.get<int64_t>(), 0) << what << ": a rank sent nothing";
    else EXPECT_EQ(v.get<int64_t>(), 0) << what;
    most = std::max(most, v.get<int64_t>());
  }
  EXPECT_EQ(p["bytes_sent_max"], most) << what;
  EXPECT_GT(p["peak_mib_rank0"].get<double>(), 0) << what;
  EXPECT_GE(p["peak_mib_max"].get<double>(), p["peak_mib_rank0"].get<double>()) << what;
  EXPECT_EQ(p["peak_mib"], p["peak_mib_rank0"]) << what;
}

TEST(BenchMpirun, RowsCarryTheParallelFields) {
  REQUIRE_MPI();
  for (const std::string mode : {"heads", "sequence"})
    for (int ranks = 1; ranks <= 3; ++ranks) {
      const std::string what = mode + " on " + std::to_string(ranks) + " ranks";
      auto r = test::run_command(mpirun(ranks) + MHA_BINARY + " bench --parallel " + mode + kShape +
                                 "--causal 1 -o jsonl");
      ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
      const auto rows = jsonl(r.out);
      ASSERT_EQ(rows.size(), 2u) << what << ": " << r.out;
      check_pair(rows[0], rows[1], mode, ranks, 1, what);
      EXPECT_EQ(rows[1]["causal"], true) << what;
    }
}

TEST(BenchMpirun, ThreadsPerRankSweepInCsvAndJson) {
  REQUIRE_MPI();
  auto r = test::run_command(mpirun(2) + MHA_BINARY + " bench --parallel sequence -t 1,2" + kShape + "-o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 4u);
  check_pair(doc["rows"][0], doc["rows"][1], "sequence", 2, 1, "t1");
  check_pair(doc["rows"][2], doc["rows"][3], "sequence", 2, 2, "t2");

  r = test::run_command(mpirun(2) + MHA_BINARY + " bench --parallel heads" + kShape + "-o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream csv(r.out);
  std::string header, line;
  std::getline(csv, header);
  for (const char* col : {",mode,", ",ranks,", ",threads_per_rank,", ",efficiency_percent,", ",baseline_median_ms,",
                          ",bytes_sent_max,", ",bytes_sent_per_rank,", ",peak_mib_rank0,", ",median_ms,", ",stddev_ms,"})
    EXPECT_NE(header.find(col), std::string::npos) << col << " in " << header;
  EXPECT_EQ(header.substr(header.size() - 13), ",peak_mib_max");
  std::vector<std::string> rows;
  while (std::getline(csv, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_NE(rows[0].find(",one-process,1,2,"), std::string::npos) << rows[0];
  EXPECT_NE(rows[1].find(",heads,2,1,"), std::string::npos) << rows[1];

  r = test::run_command(mpirun(2) + MHA_BINARY + " bench --parallel sequence" + kShape);  // md
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| sequence | 2 | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| one-process | 1 | 2 |"), std::string::npos) << r.out;
}

// Without mpirun --parallel runs on a world of one rank; without --parallel
// the rows are the usual ones (no parallel fields).
TEST(BenchMpirun, WithoutMpirun) {
  auto r = test::run_mha(std::string("bench --parallel sequence") + kShape + "--causal 1 -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), 2u);
  check_pair(rows[0], rows[1], "sequence", 1, 1, "no mpirun");
  r = test::run_mha(std::string("bench") + kShape + "-o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].contains("ranks"));
  EXPECT_FALSE(rows[0].contains("mode"));
}

TEST(BenchMpirun, Refusals) {
  REQUIRE_MPI();
  struct Case {
    int ranks;
    std::string args, err;
  };
  const std::vector<Case> cases = {
      {2, kShape, "mha: error: mha bench runs on 2 MPI ranks: give --parallel heads or --parallel sequence to split "
                  "each row across them\n"},
      {2, std::string("--parallel rows") + kShape, "mha: error: --parallel: expected heads or sequence, found 'rows'\n"},
      {2, "--parallel heads -p 8 --no-progress",
       "mha: error: --parallel: only forward rows (--seq, --causal) run across ranks; drop -p/-n/-d/--kv-cache\n"},
      {3, "--parallel heads --seq 36 --hidden 48 --heads 4 --no-progress --probes none",
       "mha: error: parallel.heads: 4 heads (4 key/value heads) do not split into 3 equal shares\n"},
      {2, "--parallel sequence --seq 30 --hidden 48 --heads 6 --causal 1 --no-progress --probes none",
       "mha: error: parallel.sequence: 30 tokens do not split into 4 equal chunks (a causal ring takes 2 per rank)\n"},
      {2, "--parallel sequence --backend tt-sim --seq 36 --hidden 48 --heads 6 --no-progress --probes none",
       "mha: error: parallel.sequence: backend tt-sim cannot run ring attention (no partial attention)\n"},
  };
  for (const Case& c : cases) {
    auto r = test::run_command(mpirun(c.ranks) + MHA_BINARY + " bench " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;  // 124: a rank hung
    EXPECT_EQ(r.err, c.err) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
}  // namespace mha
