// `mpirun -np N mha run` end to end (correctness only: on a 2-core machine
// the ranks are oversubscribed): head-parallel output against one process,
// bit for bit, for 1 to 4 ranks, and failures (bad config, a bad shape on
// one rank, a killed rank) end every rank with one line and a nonzero exit,
// never a hang.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "config/config.h"
#include "io/tensor_file.h"
#include "parallel/head_parallel.h"
#include "parallel/driver.h"
#include "parallel/world.h"
#include "head_configs.h"
#include "mpirun_support.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

// MPI for the in-process tests below, which this binary runs on itself
// under mpirun (MpiSession starts MPI only when launched by mpirun).
const std::unique_ptr<parallel::MpiSession> g_mpi = std::make_unique<parallel::MpiSession>(nullptr, nullptr);

using test::mpirun;

std::string config(int64_t heads, int64_t kv_heads, int64_t ranks, const std::string& backend) {
  return R"({"variant": "llama_attention", "params": {"hidden_size": )" + std::to_string(heads * 8) +
         R"(, "num_attention_heads": )" + std::to_string(heads) + R"(, "num_key_value_heads": )" +
         std::to_string(kv_heads) + R"(, "head_dim": 8, "attention_bias": true},
    "weights": {"init": "torch", "seed": 5}, "inputs": {"seed": 6, "x": {"randn": [2, 37, )" +
         std::to_string(heads * 8) + R"(]}}, "backend": ")" + backend +
         R"(", "runs": {"iterations": 2}, "parallel": {"heads": )" + std::to_string(ranks) + "}}";
}

// Both backends, 1 to 4 ranks: the output file is the one-process run's,
// byte for byte.
TEST(Mpirun, HeadParallelMatchesOneProcess) {
  REQUIRE_MPI();
  test::TempDir dir;
  for (const std::string backend : {"reference", "cpu"})
    for (int ranks = 1; ranks <= 4; ++ranks) {
      const std::string one = dir.file("one.json"), many = dir.file("many.json");
      test::write_text(one, config(12, ranks == 3 ? 3 : 4, 1, backend));
      test::write_text(many, config(12, ranks == 3 ? 3 : 4, ranks, backend));
      auto r1 = test::run_mha("run -c " + one + " -o " + dir.file("one.npy"));
      ASSERT_EQ(r1.exit_code, 0) << r1.err;
      auto rn = test::run_command(mpirun(ranks) + MHA_BINARY + " run -c " + many + " -o " + dir.file("many.npy"));
      ASSERT_EQ(rn.exit_code, 0) << backend << " " << ranks << " ranks: " << rn.err;
      EXPECT_EQ(test::read_text(dir.file("one.npy")), test::read_text(dir.file("many.npy")))
          << backend << " " << ranks << " ranks: not bitwise equal";
    }
}

// The cpu backend on random shapes (head_configs.h: GQA and MQA-like
// ratios, rope, windows, torch_mha cross-attention with kdim/vdim, bias_k,
// zero keys), 1 to 4 ranks, 1 and 2 threads per rank: the output file is
// the one-process run's (the config with "heads": 1), byte for byte.
TEST(Mpirun, HeadParallelCpuRandomShapesBitwise) {
  REQUIRE_MPI();
  test::TempDir dir;
  std::mt19937 rng(2026);
  for (int threads : {1, 2})
    for (int ranks = 1; ranks <= 4; ++ranks) {
      const std::string backend = R"({"name": "cpu", "threads": )" + std::to_string(threads) + "}";
      std::mt19937 same = rng;
      const std::string one_json = test::random_heads_config(same, 1, ranks, backend);
      const std::string many_json = test::random_heads_config(rng, ranks, ranks, backend);
      const std::string one = dir.file("one.json"), many = dir.file("many.json");
      test::write_text(one, one_json);
      test::write_text(many, many_json);
      auto r1 = test::run_mha("run -c " + one + " -o " + dir.file("one.npy"));
      ASSERT_EQ(r1.exit_code, 0) << r1.err << one_json;
      auto rn = test::run_command(mpirun(ranks) + MHA_BINARY + " run -c " + many + " -o " + dir.file("many.npy"));
      ASSERT_EQ(rn.exit_code, 0) << rn.err << many_json;
      EXPECT_EQ(test::read_text(dir.file("one.npy")), test::read_text(dir.file("many.npy")))
          << ranks << " ranks, " << threads << " threads: not bitwise equal: " << many_json;
    }
}

// Without mpirun: "heads": 1 is one process by another path: bit for bit on
// reference; on cpu it asks for one projection call per key/value group
// (RunOptions::group_projections) where a config without "parallel" makes one
// call over all heads, so within float32 rounding. More ranks than the world
// has is one line.
TEST(Mpirun, WithoutMpirun) {
  test::TempDir dir;
  const std::string f = dir.file("c.json");
  for (const std::string backend : {"reference", "cpu"}) {
    test::write_text(f, config(8, 2, 1, backend));
    auto r = test::run_mha("run -c " + f + " -o " + dir.file("p.npy"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string plain = config(8, 2, 1, backend);
    plain.replace(plain.find(", \"parallel\""), std::string(", \"parallel\": {\"heads\": 1}").size(), "");
    test::write_text(f, plain);
    r = test::run_mha("run -c " + f + " -o " + dir.file("one.npy"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (backend == "reference") {
      EXPECT_EQ(test::read_text(dir.file("p.npy")), test::read_text(dir.file("one.npy")));
    } else {
      r = test::run_mha("compare " + dir.file("one.npy") + " " + dir.file("p.npy") + " --atol 2e-6 --rtol 1e-5");
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
  test::write_text(f, config(8, 2, 2, "cpu"));
  auto r = test::run_mha("run -c " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.heads: the config asks for 2 ranks, but mha runs on 1 (start it with mpirun -np 2)\n");
}

TEST(Mpirun, ConfigErrorsAreOneLine) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string f = dir.file("c.json");
  test::write_text(f, config(8, 8, 3, "cpu"));
  auto r = test::run_command(mpirun(2) + MHA_BINARY + " run -c " + f + " -o " + dir.file("o.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.heads: the config asks for 3 ranks, but mha runs on 2 (start it with mpirun -np 3)\n");
  test::write_text(f, config(6, 6, 4, "cpu"));
  r = test::run_command(mpirun(4) + MHA_BINARY + " run -c " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.heads: 6 heads (6 key/value heads) do not split into 4 equal shares\n");
  test::write_text(f, R"({"variant": "torch_mha", "params": {"embed_dim": 16, "num_heads": 2},
    "inputs": {"query": {"randn": [3, 1, 16]}, "key": {"randn": [3, 1, 16]}, "value": {"randn": [3, 1, 16]}},
    "options": {"need_weights": false}, "backend": "tt-sim", "parallel": {"heads": 2}})");
  r = test::run_command(mpirun(2) + MHA_BINARY + " run -c " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "mha: error: parallel.heads: backend tt-sim cannot run head-parallel (attention \"ops\" has no separate "
            "output projection: TT-NN picks its projections' programs by their width, so a share of the heads may "
            "round otherwise; attention \"sdpa\" has one)\n");
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << "an output was written";
  r = test::run_command(mpirun(2) + MHA_BINARY + " inspect " + f);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: only `mha run`, `mha bench` and `mha op` run across MPI ranks (launched on 2)\n");
}

// Runs in this binary under mpirun (Mpirun.BadShapeOnOneRank): rank 1's
// share loses a query row, its backend rejects it, every rank stops.
TEST(InsideMpirun, BadShapeOnOneRank) {
  if (!std::getenv("MHA_TEST_INSIDE_MPIRUN")) GTEST_SKIP() << "run by Mpirun.BadShapeOnOneRank";
  if (parallel::rank() != 0) {
    EXPECT_EQ(serve_rank(), 2);
    return;
  }
  parallel::WorkerRelease release;
  PreparedRun run = prepare_run(parse_config(ordered_json::parse(config(12, 12, parallel::size(), "cpu")), ".", "x"));
  auto backend = make_backend("cpu", ordered_json::object(), "backend");
  parallel::Fault fault;
  fault.bad_shape_rank = 1;
  try {
    parallel::run_heads(run, *backend, {}, release, fault);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 1: key: expected shape (1, 37, 96), found (2, 37, 96)");
  }
}

TEST(Mpirun, BadShapeOnOneRank) {
  REQUIRE_MPI();
  for (int ranks : {2, 3}) {
    auto r = test::run_command("MHA_TEST_INSIDE_MPIRUN=1 " + mpirun(ranks) +
                               std::filesystem::read_symlink("/proc/self/exe").string() + " --gtest_filter=InsideMpirun.BadShapeOnOneRank 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
}

// A rank killed mid-run (SIGKILL after a second of a many-iteration run):
// OpenMPI aborts the job; mpirun must end nonzero well within the timeout.
TEST(Mpirun, KilledRankEndsTheJob) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string f = dir.file("c.json");
  std::string c = config(8, 8, 2, "reference");
  c.replace(c.find("\"iterations\": 2"), 15, "\"iterations\": 100000");
  test::write_text(f, c);
  const std::string script = dir.file("rank.sh");
  test::write_text(script, "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 1; kill -9 $$) & fi\nexec " +
                               std::string(MHA_BINARY) + " run -c " + f + " -o " + dir.file("o.npy") + "\n");
  auto r = test::run_command(mpirun(2) + "sh " + script);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "mpirun hung after a rank was killed";
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << "an output was written";
}

}  // namespace
}  // namespace mha
