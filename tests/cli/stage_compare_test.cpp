// `mha run --compare-stages`: masked positions compare as masked. tt-sim
// masks with -1e9 (as the seeds' TT-NN code), the cpu backend with -inf;
// before, seed 000's masked_scores read PCC 0.47 against the cpu backend.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "io/tensor_file.h"
#include "run/runner.h"
#include "run/stage_compare.h"
#include "support/test_support.h"

using namespace mha;
using namespace mha::test;

namespace {

const nlohmann::json* stage(const nlohmann::json& arr, const std::string& name) {
  for (const auto& s : arr)
    if (s["stage"] == name) return &s;
  return nullptr;
}

}  // namespace

// Causal seed 000 on tt-sim: 2 batches x 2 heads x 15 masked of 6x6.
TEST(StageCompare, Seed000MaskedScoresCompareAsMasked) {
  auto r = run_mha("run --config " + shell_quote(source_dir() + "/configs/seed000_tt_mha.json") +
                   " --compare-stages --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json* m = stage(j["stage_comparison"], "masked_scores");
  ASSERT_NE(m, nullptr);
  EXPECT_GT((*m)["pcc"].get<double>(), 0.9995);  // was 0.47 with -1e9 against -inf
  EXPECT_LT((*m)["max_abs_diff"].get<double>(), 0.05);
  EXPECT_EQ((*m)["masked"], 60);
  EXPECT_EQ((*m)["masked_disagree"], 0);
  // The unmasked stages still compare everything.
  EXPECT_EQ((*stage(j["stage_comparison"], "scores"))["masked"], 0);
  // The text table says how many were left out.
  auto t = run_mha("run --config " + shell_quote(source_dir() + "/configs/seed000_tt_mha.json") + " --compare-stages");
  EXPECT_NE(t.out.find("60 left out, all masked on both sides"), std::string::npos) << t.out;
}

// Seed 002's ttnn_mha pipeline with an attention_mask holding -inf.
TEST(StageCompare, Seed002PipelineInfMaskCompareAsMasked) {
  TempDir dir;
  std::vector<float> mask(32, 0.0f);
  for (int j = 20; j < 32; ++j) mask[j] = -std::numeric_limits<float>::infinity();
  io::write_npy(dir.file("mask.npy"), Tensor::from_f32({1, 1, 1, 32}, mask));
  write_text(dir.file("c.json"), R"({"variant": "ttnn_mha", "params": {"hidden_size": 64, "num_heads": 4},
    "weights": {"init": "torch", "seed": 0},
    "inputs": {"seed": 0, "x": {"randn": [1, 32, 64]}, "attention_mask": "mask.npy"},
    "backend": {"name": "tt-sim"}, "runs": {"warmup": 0, "iterations": 1}})");
  auto r = run_mha("run --config " + shell_quote(dir.file("c.json")) + " --compare-stages --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json* m = stage(j["stage_comparison"], "masked_scores");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((*m)["masked"], 4 * 32 * 12);
  EXPECT_EQ((*m)["masked_disagree"], 0);
  EXPECT_GT((*m)["pcc"].get<double>(), 0.9995);
}

TEST(StageCompare, MaskedInRowIsSoftmaxWeightZero) {
  const double ninf = -std::numeric_limits<double>::infinity();
  EXPECT_TRUE(masked_in_row(ninf, 3.0));
  EXPECT_TRUE(masked_in_row(-1e9, 3.0));
  EXPECT_TRUE(masked_in_row(3.0 - 104.5, 3.0));
  EXPECT_FALSE(masked_in_row(3.0 - 100.0, 3.0));  // exp(-100) is a float32 denormal, not 0
  EXPECT_FALSE(masked_in_row(0.5, 3.0));
  EXPECT_FALSE(masked_in_row(-1e9, ninf));  // a row with nothing unmasked: only -inf is masked
}

// A backend that forgets to mask one position is reported, and that
// position's value stays out of PCC either way.
TEST(StageCompare, UnmaskedPositionOnTheBackendIsReported) {
  PreparedRun run = prepare_run(load_config(source_dir() + "/configs/seed000_book_mha.json"));
  RunOptions ro;
  ro.collect_stages = true;
  AttentionResult got = make_backend("cpu", nlohmann::ordered_json::object(), "test")->run(run.spec, run.inputs, ro);
  const Shape sh = got.stages[4].second.shape();
  ASSERT_EQ(got.stages[4].first, "masked_scores");
  const std::vector<uint8_t> m = masked_positions(run.spec, run.inputs, sh);
  ASSERT_TRUE(m[1]);  // row 0, key 1: causal
  ASSERT_FALSE(m[0]);
  std::vector<double> v = got.stages[4].second.to_f64();
  v[1] = -1e9;  // masked as tt-sim masks: agrees
  got.stages[4].second = Tensor::from_f64(sh, v);
  auto c = compare_stages(run.spec, run.inputs, got.stages);
  EXPECT_EQ(c[4].masked_disagree, 0);
  EXPECT_DOUBLE_EQ(c[4].report->pcc, 1.0);
  v[1] = 0.25;  // not masked
  got.stages[4].second = Tensor::from_f64(sh, v);
  c = compare_stages(run.spec, run.inputs, got.stages);
  EXPECT_EQ(c[4].masked_disagree, 1);
  EXPECT_DOUBLE_EQ(c[4].report->pcc, 1.0);
  EXPECT_NE(format_stage_comparison(c).find("1 NOT masked on both sides"), std::string::npos);
}
