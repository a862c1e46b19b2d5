// mha compare end to end: exit codes 0/1/2, its messages, and --json.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

class CompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<float> v(48);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
    ref_ = Tensor::from_f32({4, 12}, v);
    io::write_npy(path("ref.npy"), ref_);
    io::write_npy(path("copy.npy"), ref_);
    v[5] += 0.5f;
    v[40] -= 1.0f;
    io::write_npy(path("off.npy"), Tensor::from_f32({4, 12}, v));
  }
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string q(const std::string& name) const { return shell_quote(path(name)); }
  static int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

  TempDir dir_;
  Tensor ref_;
};

TEST_F(CompareCli, IdenticalFilesPass) {
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("copy.npy"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS: 0 of 1 checks failed, 0 of 48 elements mismatched"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(CompareCli, DifferencePastToleranceFailsWithCount) {
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("off.npy"));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("2 of 48 mismatched (4.167%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max abs diff   1.000000 at [3, 4]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL: 1 of 1 checks failed, 2 of 48 elements mismatched"), std::string::npos) << r.out;
  // Loose enough tolerances pass; a threshold check alone can still fail.
  EXPECT_EQ(run_mha("compare " + q("ref.npy") + " " + q("off.npy") + " --atol 1").exit_code, 0);
  r = run_mha("compare " + q("ref.npy") + " " + q("off.npy") + " --atol 1 --max-abs 0.5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("max-abs   FAIL  1 > 0.5"), std::string::npos) << r.out;
}

TEST_F(CompareCli, TruncatedFileIsUnusable) {
  std::string bytes = read_text(path("copy.npy"));
  write_text(path("cut.npy"), bytes.substr(0, bytes.size() - 10));
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("cut.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cut.npy"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CompareCli, ShapeMismatchIsUnusable) {
  io::write_npy(path("flat.npy"), ref_.reshaped({48}));
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("flat.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("flat.npy has shape (48,), expected (4, 12) as in"), std::string::npos) << r.err;
}

TEST_F(CompareCli, MissingFileAndBadFlagsAreUnusable) {
  EXPECT_EQ(run_mha("compare " + q("ref.npy") + " " + q("nope.npy")).exit_code, 2);
  EXPECT_EQ(run_mha("compare " + q("ref.npy")).exit_code, 2);
  EXPECT_EQ(run_mha("compare " + q("ref.npy") + " " + q("copy.npy") + " --rtol -1").exit_code, 2);
  EXPECT_EQ(run_mha("compare " + q("ref.npy") + " " + q("copy.npy") + " --dtype int8").exit_code, 2);
}

TEST_F(CompareCli, NpzMemberAndIntTensors) {
  Tensor ints = Tensor::from_f64({5}, {1, 2, 3, 4, 5}).cast(DType::I32);
  Tensor other = Tensor::from_f64({5}, {1, 2, 3, 4, 6}).cast(DType::I32);
  io::write_npz(path("t.npz"), {{"a", ints}, {"b", other}, {"c", ints}});
  EXPECT_EQ(run_mha("compare " + q("t.npz") + ":a " + q("t.npz") + ":c").exit_code, 0);
  CommandResult r = run_mha("compare " + q("t.npz") + ":a " + q("t.npz") + ":b");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("1 of 5 mismatched"), std::string::npos) << r.out;
  EXPECT_EQ(run_mha("compare " + q("t.npz") + ":a " + q("t.npz") + ":zz").exit_code, 2);
}

TEST_F(CompareCli, JsonFileAndStdout) {
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("off.npy") + " --top 1 --json " + q("m.json"));
  EXPECT_EQ(r.exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(read_text(path("m.json")));
  EXPECT_EQ(j["allclose"]["mismatches"], 2);
  EXPECT_EQ(j["allclose"]["worst"].size(), 1u);
  EXPECT_EQ(j["max_abs_diff"]["value"], 1.0);
  EXPECT_EQ(j["max_abs_diff"]["index"], nlohmann::json::array({3, 4}));
  EXPECT_EQ(j["ref"]["dtype"], "float32");
  EXPECT_EQ(j["passed"], false);
  int files = 0;  // no temporary left behind by the atomic write
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 4);

  r = run_mha("compare " + q("ref.npy") + " " + q("copy.npy") + " --json -");
  EXPECT_EQ(r.exit_code, 0);
  nlohmann::json k = nlohmann::json::parse(r.out);  // stdout is only JSON
  EXPECT_EQ(k["passed"], true);
  EXPECT_EQ(k["pcc"], 1.0);
}

TEST_F(CompareCli, JsonIntoMissingFolderIsUnusable) {
  CommandResult r = run_mha("compare " + q("ref.npy") + " " + q("copy.npy") + " --json " + q("no/such/m.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace mha::test
