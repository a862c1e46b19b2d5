// Issue 10, "Misleading for CI": what a pipeline gating on mha reads must be
// exact: distinct numbers on a FAIL line, nothing but JSON with `--json -`,
// torch's dtype rule, one-line flag errors with readable bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

class CiSurface : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string q(const std::string& name) const { return shell_quote(path(name)); }
  static int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }
  static void expect_one_line_error(const CommandResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("mha: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
  TempDir dir_;
};

TEST_F(CiSurface, PccFailLineShowsTwoDifferentNumbers) {
  std::vector<float> ref(1000), out(1000);
  for (int i = 0; i < 1000; ++i) {
    ref[i] = static_cast<float>(std::sin(i));
    out[i] = ref[i] + 1e-3f * static_cast<float>(std::cos(7 * i));
  }
  io::write_npy(path("ref.npy"), Tensor::from_f32({1000}, ref));
  io::write_npy(path("out.npy"), Tensor::from_f32({1000}, out));
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("out.npy") + " --atol 1 --pcc 0.9999999");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // The check line: "pcc  FAIL <value> < <threshold>" (no std::regex: GCC 12
  // reports false maybe-uninitialized warnings inside libstdc++'s regex).
  const size_t at = r.out.find("FAIL", r.out.find("pcc "));
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream line(r.out.substr(at + 4, r.out.find('\n', at) - at - 4));
  std::string value, lt, threshold;
  line >> value >> lt >> threshold;
  ASSERT_EQ(lt, "<") << r.out;
  EXPECT_NE(value, threshold) << r.out;
  EXPECT_EQ(threshold, "0.9999999");
  EXPECT_LT(std::stod(value), 0.9999999);
  EXPECT_GT(std::stod(value), 0.999999);
}

TEST_F(CiSurface, JsonDashMeansOnlyJsonOnStdout) {
  const std::string config = shell_quote(source_dir() + "/configs/seed000_book_mha.json");
  CommandResult r = run_mha("run -n 1 -c " + config + " --json - --compare-stages");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);  // throws on any text around the JSON
  EXPECT_EQ(j["output"]["shape"], nlohmann::json({2, 6, 2}));
  EXPECT_EQ(j["stage_comparison"].size(), 8u);
  // The text report still goes to stdout without --json -.
  r = run_mha("run -n 1 -c " + config);
  EXPECT_NE(r.out.find("tensor([[[0.3190, 0.4858]"), std::string::npos) << r.out;

  io::write_npy(path("a.npy"), Tensor::from_f32({2}, {1, 2}));
  r = run_mha("compare " + q("a.npy") + " " + q("a.npy") + " --json -");
  EXPECT_EQ(nlohmann::json::parse(r.out)["passed"], true);
  r = run_mha("inspect " + q("a.npy") + " --json");
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  r = run_mha("bench --seq 8 --hidden 16 --heads 2 -r 1 --warmup 0 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;  // progress went to stderr
}

TEST_F(CiSurface, DtypeMismatchIsReportedAsTorchDoesAndDtypeCasts) {
  std::vector<float> v = {0.5f, -1.25f, 3.0f, 0.15625f};
  io::write_npy(path("ref.npy"), Tensor::from_f32({4}, v));
  io::write_safetensors(path("out.safetensors"), {{"y", Tensor::from_f32({4}, v).cast(DType::BF16)}});
  const std::string files = q("ref.npy") + " " + q("out.safetensors") + ":y";
  CommandResult r = run_mha("compare " + files);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("dtype     FAIL  torch.float32 != torch.bfloat16"), std::string::npos) << r.out;
  r = run_mha("compare " + files + " --json -");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checks"][0], nlohmann::json({{"name", "dtype"}, {"passed", false}, {"value", "bfloat16"},
                                            {"threshold", "float32"}}));
  // --dtype casts both, under its long name or the short aliases.
  for (const char* d : {"bfloat16", "bf16", "fp32", "float32", "fp16"}) {
    r = run_mha("compare " + files + " --dtype " + d);
    EXPECT_EQ(r.exit_code, 0) << d << ": " << r.out << r.err;
  }
  expect_one_line_error(run_mha("compare " + files + " --dtype int8"), "expected bfloat16 (bf16)");
}

TEST_F(CiSurface, DegeneratePccFollowsTtMetal) {
  io::write_npy(path("c5.npy"), Tensor::from_f32({4}, {0.5f, 0.5f, 0.5f, 0.5f}));
  io::write_npy(path("c7.npy"), Tensor::from_f32({4}, {0.7f, 0.7f, 0.7f, 0.7f}));
  io::write_npy(path("one.npy"), Tensor::from_f32({1}, {1.0f}));
  io::write_npy(path("onehalf.npy"), Tensor::from_f32({1}, {1.5f}));
  CommandResult r = run_mha("compare " + q("c5.npy") + " " + q("c7.npy") + " --atol 1 --pcc 0.99 --json -");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["pcc"], 0.0);
  r = run_mha("compare " + q("one.npy") + " " + q("onehalf.npy") + " --atol 1 --pcc 0.99 --json -");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["pcc"], 0.0);
}

// -n 0 (runs.iterations 0): the first run only, for runs that take
// minutes; no warm-up follows it and no cached timing is made up.
TEST_F(CiSurface, ZeroIterationsRunsOnce) {
  const std::string config = shell_quote(source_dir() + "/configs/llama_attention.json");
  CommandResult r = run_mha("run -c " + config + " -n 0 --warmup 3 -o " + q("out.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cached runs: none (iterations 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plan cache: 0 hits, 1 misses"), std::string::npos) << r.out;
  const Tensor once = io::read_tensor(path("out.npy"));
  r = run_mha("run -c " + config + " -n 2 -o " + q("out2.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::tensors_close(once, io::read_tensor(path("out2.npy")), 0, 0));
}

TEST_F(CiSurface, FlagErrorsAreOneLineWithReadableBounds) {
  io::write_npy(path("a.npy"), Tensor::from_f32({2}, {1, 2}));
  const std::string config = shell_quote(source_dir() + "/configs/seed000_book_mha.json");
  expect_one_line_error(run_mha("compare " + q("a.npy")), "OUT");
  expect_one_line_error(run_mha("bench -r 0"), "--repetitions: expected an integer >= 1, found '0'");
  expect_one_line_error(run_mha("bench -r 0.5"), "expected an integer >= 1");
  expect_one_line_error(run_mha("bench --warmup -1"), "--warmup: expected an integer >= 0, found '-1'");
  expect_one_line_error(run_mha("run -c " + config + " -n -1"), "--iterations: expected an integer >= 0, found '-1'");
  expect_one_line_error(run_mha("run -c " + config + " -n 0.5"), "expected an integer >= 0");
  expect_one_line_error(run_mha("run -c " + config + " --warmup -2"), "expected an integer >= 0");
  expect_one_line_error(run_mha("nosuch"), "subcommand");
  expect_one_line_error(run_mha("compare " + q("a.npy") + " " + q("a.npy") + " --pcc 2"), "[-1, 1]");
  CommandResult r = run_mha("bench -r 0");
  EXPECT_EQ(r.err.find("1797693"), std::string::npos) << r.err;
  EXPECT_EQ(run_mha("--help").exit_code, 0);
  EXPECT_EQ(run_mha("--version").exit_code, 0);
}

}  // namespace
}  // namespace mha::test
