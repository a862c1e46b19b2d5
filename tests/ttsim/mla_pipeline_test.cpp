// Multi-head latent attention on tt-sim (ttsim_mla.h): configs/
// mla_attention_ttsim.json (DeepSeek-V3's attention widths: kv_lora_rank 512,
// qk_rope 64, qk_nope 128, v 128; 8 heads, hidden 512) runs through
// flash_mla_prefill and tracks the reference backend's float64 output and
// the cpu backend's (with --compare-stages); the run names the ops; decode
// and attention "ops" are refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/compare.h"
#include "io/tensor_file.h"
#include "support/test_support.h"

using namespace mha;
using namespace mha::test;

namespace {

// `-b reference` takes none of the config's tt-sim options (its tt_metal).
Tensor run_config(const TempDir& d, const std::string& backend) {
  const std::string out = d.file(backend + ".npy");
  const CommandResult r = run_mha("run -c " + shell_quote(source_dir() + "/configs/mla_attention_ttsim.json") +
                                  " -n 0 -b " + backend + " -o " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return io::read_tensor(out);
}

}  // namespace

// The output leaves the device as bfloat8_b (the model's WO prefill dtype):
// 7 significant bits per block, so one rounding moves a value by up to half
// a block step, 2^-7 of the block's peak. The bound is four such half-steps
// at the output's peak (measured: 2.2 of them, max abs error 0.0189 at peak
// 1.11) and PCC 0.999 (measured 0.99967).
TEST(TtSimMla, DeepSeekWidthsTrackFloat64) {
  TempDir d;
  const Tensor want = run_config(d, "reference"), got = run_config(d, "tt-sim");
  const compare::Report c = compare::compare(want, got, compare::Options{});
  double peak = 0;
  for (double x : want.to_f64()) peak = std::max(peak, std::fabs(x));
  EXPECT_GE(c.pcc, 0.999);
  ASSERT_TRUE(c.max_abs_diff.has_value());
  EXPECT_LE(c.max_abs_diff->value, 4 * std::ldexp(peak, -7));
}

// Issue 29's tt-sim check for MLA, as for Qwen3 and gpt-oss
// (hf_families_ttsim_test.cpp): PCC >= 0.99 against the cpu backend, and
// `--compare-stages` compares the stages both backends collect, the
// context [B, L, H dv] and the output, each within the same PCC.
TEST(TtSimMla, TracksCpuAndComparesStages) {
  TempDir d;
  const Tensor want = run_config(d, "cpu"), got = run_config(d, "tt-sim");
  const double pcc = compare::compare(want, got, compare::Options{}).pcc;
  std::cout << "PCC against cpu " << pcc << "\n";
  EXPECT_GE(pcc, 0.99);
  const CommandResult r = run_mha("run -c " + shell_quote(source_dir() + "/configs/mla_attention_ttsim.json") +
                                  " -n 0 --compare-stages --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json st = nlohmann::json::parse(r.out)["stage_comparison"];
  ASSERT_EQ(st.size(), 2u) << st;
  const char* names[] = {"context", "output"};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(st[i]["stage"], names[i]);
    ASSERT_TRUE(st[i]["pcc"].is_number()) << st[i];  // null: no cpu stage of that name and shape
    EXPECT_GE(st[i]["pcc"].get<double>(), 0.99);
  }
  EXPECT_EQ(st[0]["shape"], nlohmann::json::array({1, 96, 8 * 128}));
  // The text form names both.
  const CommandResult t = run_mha("run -c " + shell_quote(source_dir() + "/configs/mla_attention_ttsim.json") +
                                  " -n 0 --compare-stages");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("stages vs cpu backend"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("(no cpu stage)"), std::string::npos) << t.out;
}

TEST(TtSimMla, TheRunReportsFlashMlaPrefill) {
  const CommandResult r = run_mha("run -c " + shell_quote(source_dir() + "/configs/mla_attention_ttsim.json") +
                                  " -n 0 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ttnn.transformer.flash_mla_prefill"), std::string::npos);
  EXPECT_NE(r.out.find("\"pipeline\": \"mla\""), std::string::npos);
}

// The config with another backend object and extra top-level keys, written
// to d. The config runs at the default profile (tt_metal latest).
std::string config_variant(const TempDir& d, const std::string& name, const std::string& backend,
                           const std::string& extra) {
  std::string c = read_text(source_dir() + "/configs/mla_attention_ttsim.json");
  const std::string tt = "{\"name\": \"tt-sim\"}";
  const size_t at = c.find(tt);
  EXPECT_NE(at, std::string::npos) << c;
  if (at != std::string::npos) c.replace(at, tt.size(), backend + extra);
  write_text(d.file(name), c);
  return d.file(name);
}

TEST(TtSimMla, AttentionOpsIsRefusedWithTheReason) {
  TempDir d;
  const std::string ops = config_variant(
      d, "ops.json", "{\"name\": \"tt-sim\", \"tt_metal\": \"2024\", \"attention\": \"ops\"}", "");
  expect_input_error(run_mha("run -c " + shell_quote(ops) + " -n 0"), "flash_mla_prefill only");
}

// Decode over the device's latent cache (64-token prompt, then 32 steps of
// flash_multi_latent_attention_decode), against the reference backend's
// float64 decode of the same tokens: the prompt's rows are the prefill's
// (PCC 0.999 as above); the decoded rows keep Q, the attention output and
// the context in bfloat16 where prefill packs them to bfloat8_b, so they
// are held to the same PCC bound (measured: prompt 0.99967, decoded rows
// 0.99965, max abs 0.0080 where the prefill of those rows has 0.0054).
TEST(TtSimMla, DecodeTracksFloat64) {
  TempDir d;
  const std::string cfg = config_variant(d, "decode.json", "{\"name\": \"tt-sim\"}",
                                         ", \"decode\": {\"prompt\": 64, \"tokens\": 32}");
  Tensor out[2];
  const char* backends[] = {"reference", "tt-sim"};
  for (int i = 0; i < 2; ++i) {
    const CommandResult r = run_mha("run -c " + shell_quote(cfg) + " -n 0 -b " + backends[i] + " -o " +
                                    shell_quote(d.file(std::string(backends[i]) + ".npy")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    out[i] = io::read_tensor(d.file(std::string(backends[i]) + ".npy"));
  }
  ASSERT_EQ(out[0].shape(), out[1].shape());
  // The prompt's rows are the prefill's bit for bit (64 and 96 tokens both
  // pad to 128, and causal rows do not see later ones).
  const Tensor prefill = run_config(d, "tt-sim");
  EXPECT_EQ(std::memcmp(prefill.data<float>(), out[1].data<float>(), 4 * 64 * out[1].dim(2)), 0);
  const int64_t L = out[0].dim(1), E = out[0].dim(2);
  const std::vector<double> want = out[0].to_f64(), got = out[1].to_f64();
  for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, 64}, {64, L}}) {
    const Tensor w = Tensor::from_f32({1, r1 - r0, E}, std::vector<float>(want.begin() + r0 * E, want.begin() + r1 * E));
    const Tensor g = Tensor::from_f32({1, r1 - r0, E}, std::vector<float>(got.begin() + r0 * E, got.begin() + r1 * E));
    const compare::Report c = compare::compare(w, g, compare::Options{});
    std::cout << "rows " << r0 << ".." << r1 << ": PCC " << c.pcc << ", max abs " << c.max_abs_diff->value << "\n";
    EXPECT_GE(c.pcc, 0.999) << "rows " << r0 << ".." << r1;
  }
}

// "tt_metal": "latest": flash_mla_prefill runs the program the factory picks
// (the recipe's fp32 Dst: sdpa_standard; "fp32_dest_acc_en": false: the
// streaming kernel) and decode SDPA decode's latest kernel with use_mla.
// Both track float64 as the 2024 run does (measured: PCC 0.99967 prefill
// and 0.99966 with 32 decoded tokens with an fp32 Dst, 0.99953 and 0.99950
// with a 16-bit one).
TEST(TtSimMla, LatestProfileTracksFloat64) {
  TempDir d;
  const std::string ref = config_variant(d, "ref.json", "{\"name\": \"tt-sim\"}",
                                         ", \"decode\": {\"prompt\": 64, \"tokens\": 32}");
  ASSERT_EQ(run_mha("run -c " + shell_quote(ref) + " -n 0 -b reference -o " + shell_quote(d.file("ref.npy"))).exit_code,
            0);
  const Tensor want_decode = io::read_tensor(d.file("ref.npy")), want = run_config(d, "reference");
  for (const char* dst : {"", ", \"fp32_dest_acc_en\": false"}) {
    const std::string backend = std::string("{\"name\": \"tt-sim\", \"tt_metal\": \"latest\"") + dst + "}";
    for (bool decode : {false, true}) {
      const std::string cfg = config_variant(d, "latest.json", backend,
                                             decode ? ", \"decode\": {\"prompt\": 64, \"tokens\": 32}" : "");
      const CommandResult r = run_mha("run -c " + shell_quote(cfg) + " -n 0 -o " + shell_quote(d.file("got.npy")));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("tt_metal: latest"), std::string::npos) << r.out;
      const compare::Report c = compare::compare(decode ? want_decode : want, io::read_tensor(d.file("got.npy")),
                                                 compare::Options{});
      std::cout << backend << (decode ? " decode" : " prefill") << ": PCC " << c.pcc << "\n";
      EXPECT_GE(c.pcc, 0.999) << backend << (decode ? " decode" : " prefill");
    }
  }
}
