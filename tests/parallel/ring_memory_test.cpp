// A ring run's memory per rank (issue 13): every rank gets only its rows of
// the input (drawn from the seed, or read by row ranges from a .npy file)
// and rank 0 writes output rows as they arrive. Checked here: the rows are
// the numbers of the whole tensor (TorchGenerator::rows, io::NpyRows,
// io::NpyRowWriter), the streamed runs give the same bits as the run that
// holds the whole input and output on rank 0 (an .npz input) at 1 to 4
// ranks, a failure on one rank leaves an existing output as it was, and the
// JSON report carries every rank's peak resident memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "config/config.h"
#include "init/torch_generator.h"
#include "io/output_set.h"
#include "io/tensor_file.h"
#include "parallel/ring.h"
#include "parallel/driver.h"
#include "parallel/world.h"
#include "tensor/format.h"
#include "mpirun_support.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

// MPI for the in-process test below comes from mpirun_test.cpp's MpiSession
// (one per process: this file is linked into the same test_parallel).

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Rows `ranges` of dim 1 of t [B, L, ...], in range order.
Tensor slice_rows(const Tensor& t, const Ranges& ranges) {
  const int64_t B = t.dim(0), L = t.dim(1);
  int64_t n = 0;
  for (const auto& r : ranges) n += r.second;
  Shape s = t.shape();
  s[1] = n;
  Tensor out(t.dtype(), s);
  const std::size_t row = t.nbytes() / (B * L);
  uint8_t* dst = out.raw();
  for (int64_t b = 0; b < B; ++b)
    for (const auto& [start, len] : ranges) {
      std::memcpy(dst, t.raw() + (b * L + start) * row, len * row);
      dst += len * row;
    }
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(RingRows, GeneratorRowsAreTheWholeTensorsRows) {
  // 2 x 3000 x 700 = 4.2M values: several 1M-value pieces, ranges inside and across them.
  const Shape shape{2, 3000, 700};
  for (bool normal : {false, true}) {
    TorchGenerator whole_gen(7);
    const Tensor whole = normal ? whole_gen.randn(shape) : whole_gen.rand(shape);
    for (const Ranges& r : {Ranges{{0, 3000}}, Ranges{{0, 375}, {2625, 375}}, Ranges{{1125, 375}, {1500, 375}},
                            Ranges{{1499, 2}}, Ranges{{2999, 1}}}) {
      TorchGenerator gen(7);
      EXPECT_TRUE(same_bits(gen.rows(shape, r, normal), slice_rows(whole, r)))
          << (normal ? "randn" : "rand") << " rows from " << r[0].first;
    }
  }
  // randn of a size that is not a multiple of 16: torch redraws the last 16 values.
  TorchGenerator a(3), b(3);
  const Shape odd{1, 5, 7};
  EXPECT_TRUE(same_bits(a.rows(odd, {{1, 2}, {4, 1}}, true), slice_rows(b.randn(odd), {{1, 2}, {4, 1}})));
}

TEST(RingRows, NpyFileIsReadByRowRanges) {
  test::TempDir dir;
  std::mt19937 g(1);
  const Tensor t = test::rand_tensor(g, {3, 10, 4}, -1, 1);
  const std::string f = dir.file("x.npy");
  io::write_npy(f, t);
  const io::NpyRows rows(f);
  EXPECT_EQ(rows.shape(), t.shape());
  const Ranges r{{1, 2}, {7, 3}};
  EXPECT_TRUE(same_bits(rows.read(r), slice_rows(t, r)));
  EXPECT_THROW(rows.read({{8, 3}}), InputError);
  // Big-endian float64 and Fortran order, as numpy writes them.
  const std::string be = dir.file("be.npy"), fo = dir.file("f.npy");
  auto py = test::run_python("import numpy as np\nx = np.arange(60, dtype='>f8').reshape(2, 6, 5)\nnp.save('" + be +
                             "', x)\nnp.save('" + fo + "', np.asfortranarray(x))\n");
  if (py.exit_code != 0) GTEST_SKIP() << "no numpy: " << py.err;
  const Tensor whole = io::read_npy(be);
  EXPECT_TRUE(same_bits(io::NpyRows(be).read({{2, 3}}), slice_rows(whole, {{2, 3}})));
  EXPECT_THROW(io::NpyRows{fo}, InputError);
}

TEST(RingRows, NpyRowWriterPlacesRowsInAnyOrder) {
  test::TempDir dir;
  std::mt19937 g(2);
  const Tensor t = test::rand_tensor(g, {2, 8, 3}, -1, 1);
  const std::string f = dir.file("y.npy");
  {
    io::NpyRowWriter w(f, t.dtype(), t.shape());
    for (const Ranges& r : {Ranges{{6, 2}}, Ranges{{0, 3}}, Ranges{{3, 3}}})
      for (int64_t b = 0; b < 2; ++b) w.write(b, r[0].first, r[0].second, t.raw() + (b * 8 + r[0].first) * 12);
    w.close();
  }
  EXPECT_TRUE(same_bits(io::read_npy(f), t));
}

// A causal llama layer of 2 x 48 tokens (48 splits into 2N chunks for N = 1..4).
std::string ring_config(const std::string& x, int ranks, const std::string& backend) {
  return R"({"variant": "llama_attention", "params": {"hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16}, "weights": {"init": "torch", "seed": 3},
    "inputs": {"seed": 9, "x": )" + x + R"(}, "backend": ")" + backend + R"(", "runs": {"iterations": 1},
    "parallel": {"sequence": )" + std::to_string(ranks) + "}}";
}

// Input preparation is the run driver's, never the ring's: prepare_for reads
// a ring run's model only, prepare_ring_input reads its inputs (rows per rank
// for rand / .npy, whole for .npz), and run_ring refuses a run whose inputs
// are still pending instead of reading them itself.
TEST(RingMemory, InputsArePreparedBeforeTheRing) {
  test::TempDir dir;
  TorchGenerator gen(9);
  const Tensor x = gen.rand({2, 48, 64});
  io::write_npy(dir.file("x.npy"), x);
  io::write_npz(dir.file("x.npz"), {{"x", x}});
  const std::vector<std::pair<std::string, bool>> cases = {
      {R"({"rand": [2, 48, 64]})", true}, {'"' + dir.file("x.npy") + '"', true}, {'"' + dir.file("x.npz") + '"', false}};
  for (const auto& [src, by_rows] : cases) {
    PreparedRun run = prepare_for(parse_config(ordered_json::parse(ring_config(src, 2, "cpu")), ".", "c"));
    EXPECT_EQ(run.input_state, InputState::Pending) << src;
    EXPECT_EQ(run.inputs.query.ndim(), 0) << src;
    auto backend = make_backend("cpu", ordered_json::object(), "backend");
    {
      parallel::WorkerRelease release;
      EXPECT_THROW(parallel::run_ring(run, {}, *backend, {}, release), std::logic_error) << src;
    }
    const parallel::RingInput input = parallel::prepare_ring_input(run);
    EXPECT_EQ(run.input_state, InputState::Ready) << src;
    EXPECT_EQ(input.rows.has_value(), by_rows) << src;
    // Whole: x itself; by rows: the checks' stand-in of x's shape.
    EXPECT_EQ(run.inputs.query.shape(), (Shape{2, 48, 64})) << src;
    if (!by_rows) {
      EXPECT_TRUE(same_bits(run.inputs.query, x)) << src;
    }
  }
}

// The same input drawn per rank (rand), read by rows (.npy) and held whole by
// rank 0 (.npz, the path every input took before): the same output bits.
TEST(RingMemory, StreamedRunsMatchTheWholeInputRun) {
  REQUIRE_MPI();
  test::TempDir dir;
  const Shape shape{2, 48, 64};
  TorchGenerator gen(9);
  const Tensor x = gen.rand(shape);
  io::write_npy(dir.file("x.npy"), x);
  io::write_npz(dir.file("x.npz"), {{"x", x}});
  // cpu at 1-4 ranks, reference (float64) at 3: each case is three mpirun launches.
  for (const auto& [backend, ranks] : std::vector<std::pair<std::string, int>>{{"cpu", 1}, {"cpu", 2}, {"cpu", 3}, {"cpu", 4}, {"reference", 3}}) {
      std::vector<Tensor> outs;
      for (const auto& [src, how] : {std::pair<std::string, std::string>{R"({"rand": [2, 48, 64]})", "rows drawn by each rank"},
                                     {'"' + dir.file("x.npy") + '"', "rows read by rank 0 per rank"},
                                     {'"' + dir.file("x.npz:x") + '"', "whole on rank 0"}}) {
        const std::string c = dir.file("c.json"), o = dir.file("o" + std::to_string(outs.size()) + ".npy");
        test::write_text(c, ring_config(src, ranks, backend));
        auto r = test::run_command(test::mpirun(ranks) + MHA_BINARY + " run -c " + c + " -o " + o + " --json " +
                                   dir.file("r.json"));
        ASSERT_EQ(r.exit_code, 0) << backend << " " << ranks << " ranks, " << how << ": " << r.err;
        const auto rep = nlohmann::json::parse(test::read_text(dir.file("r.json")));
        EXPECT_EQ(rep["backend_info"]["parallel"]["input"], how);
        outs.push_back(io::read_npy(o));
      }
      EXPECT_TRUE(same_bits(outs[0], outs[2])) << backend << " " << ranks << " ranks: drawn rows";
      EXPECT_TRUE(same_bits(outs[1], outs[2])) << backend << " " << ranks << " ranks: rows read from .npy";
    }
}

// An output of more than 100000 values is never whole on rank 0: it goes to
// the file row by row, and the printed summary is the whole tensor's.
TEST(RingMemory, LargeOutputIsWrittenByRowsAndSummarized) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string c = dir.file("c.json"), o = dir.file("o.npy");
  std::string cfg = ring_config(R"({"randn": [1, 2048, 64]})", 2, "cpu");
  test::write_text(c, cfg);
  auto r = test::run_command(test::mpirun(2) + MHA_BINARY + " run -c " + c + " -o " + o + " --json " + dir.file("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rep = nlohmann::json::parse(test::read_text(dir.file("r.json")));
  EXPECT_EQ(rep["backend_info"]["parallel"]["output"], "rows written as they arrive");
  EXPECT_EQ(rep["output"]["shape"], nlohmann::json::array({1, 2048, 64}));
  EXPECT_FALSE(rep["output"].contains("values"));
  // The text summary: as one process prints the file's tensor.
  auto text = test::run_command(test::mpirun(2) + MHA_BINARY + " run -c " + c);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string want = "output:\n" + format_torch(io::read_npy(o)) + "\n";
  EXPECT_NE(text.out.find(want), std::string::npos) << text.out;
}

// Every rank's VmHWM, in rank order, in the JSON report (ring and heads).
TEST(RingMemory, PeakMemoryPerRankIsReported) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string c = dir.file("c.json");
  for (const std::string mode : {"sequence", "heads"}) {
    std::string cfg = ring_config(R"({"rand": [2, 48, 64]})", 3, "cpu");
    if (mode == "heads") cfg.replace(cfg.find("\"sequence\": 3"), 13, "\"heads\": 2");
    const int ranks = mode == "heads" ? 2 : 3;
    test::write_text(c, cfg);
    auto r = test::run_command(test::mpirun(ranks) + MHA_BINARY + " run -c " + c + " --json " + dir.file("r.json"));
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    const auto p = nlohmann::json::parse(test::read_text(dir.file("r.json")))["backend_info"]["parallel"];
    ASSERT_EQ(p["peak_rss_bytes_per_rank"].size(), static_cast<std::size_t>(ranks)) << mode;
    for (const auto& v : p["peak_rss_bytes_per_rank"]) {
      EXPECT_GT(v.get<int64_t>(), 1 << 20) << mode;  // at least the binary's pages
      EXPECT_LT(v.get<int64_t>(), int64_t{1} << 32) << mode;
    }
  }
}

// Runs in this binary under mpirun (RingMemory.FailureOnOneRankKeepsTheOutput):
// rank 1 fails to decode its work while rank 0 streams into an output's
// temporary; the existing output stays as it was and the temporary goes.
TEST(InsideMpirun, RingFailureOnOneRank) {
  if (!std::getenv("MHA_TEST_INSIDE_MPIRUN")) GTEST_SKIP() << "run by RingMemory.FailureOnOneRankKeepsTheOutput";
  if (parallel::rank() != 0) {
    EXPECT_EQ(serve_rank(), 2);
    return;
  }
  const std::string out = std::getenv("MHA_TEST_OUTPUT");
  parallel::WorkerRelease release;
  RunConfig config = parse_config(ordered_json::parse(ring_config(R"({"randn": [1, 2040, 64]})", parallel::size(), "cpu")), ".", "x");
  PreparedRun run = prepare_for(config);
  auto backend = make_backend("cpu", ordered_json::object(), "backend");
  parallel::Fault fault;
  fault.bad_shape_rank = 1;
  {
    io::OutputSet outs;
    outs.add_file("--output", out);
    RunRequest req;
    req.output_file = outs.temporary(out);
    try {
      drive_run(run, *backend, req, release, fault);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("rank 1: ", 0), 0u) << e.what();
    }
  }
  EXPECT_EQ(test::read_text(out), "keep me");
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(out).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".mha-tmp-"), std::string::npos) << e.path();
}

TEST(RingMemory, FailureOnOneRankKeepsTheOutput) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string out = dir.file("o.npy");
  test::write_text(out, "keep me");
  for (int ranks : {2, 3}) {
    auto r = test::run_command("MHA_TEST_INSIDE_MPIRUN=1 MHA_TEST_OUTPUT=" + out + " " + test::mpirun(ranks) +
                               std::filesystem::read_symlink("/proc/self/exe").string() +
                               " --gtest_filter=InsideMpirun.RingFailureOnOneRank 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
  // Through `mha run`: a rank killed mid-run leaves the existing output as it was.
  const std::string c = dir.file("c.json"), script = dir.file("rank.sh");
  std::string cfg = ring_config(R"({"rand": [2, 48, 64]})", 2, "reference");
  cfg.replace(cfg.find("\"iterations\": 1"), 15, "\"iterations\": 100000");
  test::write_text(c, cfg);
  test::write_text(script, "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 1; kill -9 $$) & fi\nexec " +
                               std::string(MHA_BINARY) + " run -c " + c + " -o " + out + "\n");
  auto r = test::run_command(test::mpirun(2) + "sh " + script);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "mpirun hung after a rank was killed";
  EXPECT_EQ(test::read_text(out), "keep me");
}

}  // namespace
}  // namespace mha
