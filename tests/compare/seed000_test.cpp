// Seed 000's closing comparison of its torch and TT-hardware outputs:
// compare_tensors printed, in bfloat16 arithmetic, max abs diff 0.023438,
// mean abs diff 0.009949 and correlation 0.996094 (docs/COMPARE.md).
#include <gtest/gtest.h>

#include "compare/compare.h"
#include "compare/numeric.h"
#include "compare/report.h"
#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

// The notebook's printed values: torch's rounded to bfloat16 (its
// "Sample Value Comparisons" lines show 0.3190 as 0.318359), TTNN's
// already bfloat16. Batch 1 repeats batch 0.
const std::vector<float> kTorchRow = {0.3190f, 0.4858f, 0.2943f, 0.3897f, 0.2856f, 0.3593f,
                                      0.2693f, 0.3873f, 0.2639f, 0.3928f, 0.2575f, 0.4028f};
const std::vector<float> kTtnnRow = {0.3145f, 0.4922f, 0.2891f, 0.4043f, 0.2773f, 0.3828f,
                                     0.2656f, 0.4004f, 0.2598f, 0.4062f, 0.2520f, 0.4199f};

Tensor seed_tensor(const std::vector<float>& row) {
  std::vector<float> v;
  for (int b = 0; b < 2; ++b)
    for (float x : row) v.push_back(static_cast<float>(compare::round_to(DType::BF16, x)));
  return Tensor::from_f32({2, 6, 2}, v);
}

compare::Options seed_options() {
  compare::Options o;
  o.as_dtype = DType::BF16;
  o.max_abs = 0.025;  // compare_tensors(max_diff_tolerance=0.025)
  o.mean_abs = 0.02;  // and its defaults
  o.pcc = 0.99;
  return o;
}

TEST(Seed000, ReproducesCompareTensors) {
  compare::Report r = compare::compare(seed_tensor(kTorchRow), seed_tensor(kTtnnRow), seed_options());
  ASSERT_TRUE(r.max_abs_diff);
  EXPECT_EQ(r.max_abs_diff->value, 0.0234375);
  EXPECT_EQ(compare::format_metric(r.max_abs_diff->value), "0.023438");
  EXPECT_EQ(r.max_abs_diff->index, (std::vector<int64_t>{0, 2, 1}));
  // Double arithmetic; rounded to bfloat16 it is what the seed printed.
  EXPECT_NEAR(*r.mean_abs_diff, 0.23828125 / 24, 1e-17);
  EXPECT_EQ(compare::format_metric(compare::round_to(DType::BF16, *r.mean_abs_diff)), "0.009949");
  EXPECT_NEAR(r.pcc, 0.9950771424651745, 1e-13);
  EXPECT_EQ(compare::format_metric(compare::round_to(DType::BF16, r.pcc)), "0.996094");
  // The seed's three checks pass; torch's bfloat16 allclose does not.
  for (const compare::Check& c : r.checks) EXPECT_EQ(c.passed, c.name != "allclose") << c.name;
  EXPECT_EQ(r.mismatches, 16);
  std::string text = compare::format_text(r);
  EXPECT_NE(text.find("max abs diff   0.023438 at [0, 2, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("mean abs diff  0.009928 (in bfloat16: 0.009949)"), std::string::npos) << text;
  EXPECT_NE(text.find("pcc            0.995077 (in bfloat16: 0.996094)"), std::string::npos) << text;
}

TEST(Seed000, DataFilesHoldTheNotebookValues) {
  Tensor torch_out = io::read_tensor(source_dir() + "/data/seed000_torch_out.npy");
  Tensor ttnn_out = io::read_tensor(source_dir() + "/data/seed000_ttnn_out.npy");
  EXPECT_TRUE(tensors_close(torch_out, seed_tensor(kTorchRow), 0, 0));
  EXPECT_TRUE(tensors_close(ttnn_out, seed_tensor(kTtnnRow), 0, 0));
}

TEST(Seed000, CommandLinePassesWithTheSeedsThresholds) {
  std::string files = shell_quote(source_dir() + "/data/seed000_torch_out.npy") + " " +
                      shell_quote(source_dir() + "/data/seed000_ttnn_out.npy");
  CommandResult r = run_mha("compare " + files + " --dtype bfloat16 --max-abs 0.025 --mean-abs 0.02 --pcc 0.99 --atol 0.025");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("max abs diff   0.023438"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS: 0 of 4 checks failed"), std::string::npos) << r.out;
  // Without --atol, bfloat16's default allclose (rtol 1.6e-2) rejects 16 of 24.
  r = run_mha("compare " + files + " --dtype bfloat16");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("16 of 24 elements mismatched"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha::test
