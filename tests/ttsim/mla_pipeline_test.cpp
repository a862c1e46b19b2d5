// Multi-head latent attention on tt-sim (ttsim_mla.h): configs/
// mla_attention_ttsim.json (DeepSeek-V3's attention widths: kv_lora_rank 512,
// qk_rope 64, qk_nope 128, v 128; 8 heads, hidden 512) runs through
// flash_mla_prefill and tracks the reference backend's float64 output; the
// run names the ops; decode and attention "ops" are refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <vector>

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

TEST(TtSimMla, TheRunReportsFlashMlaPrefill) {
  const CommandResult r = run_mha("run -c " + shell_quote(source_dir() + "/configs/mla_attention_ttsim.json") +
                                  " -n 0 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ttnn.transformer.flash_mla_prefill"), std::string::npos);
  EXPECT_NE(r.out.find("\"pipeline\": \"mla\""), std::string::npos);
}

// The config with another backend object and extra top-level keys, written
// to d. The config binds tt_metal 2024, the one profile flash MLA is
// modelled at.
std::string config_variant(const TempDir& d, const std::string& name, const std::string& backend,
                           const std::string& extra) {
  std::string c = read_text(source_dir() + "/configs/mla_attention_ttsim.json");
  const std::string tt = "{\"name\": \"tt-sim\", \"tt_metal\": \"2024\"}";
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

// At tt_metal latest, the default, flash MLA is not modelled yet: one line
// naming the way out, the profile the config binds.
TEST(TtSimMla, LatestIsRefusedNamingThe2024Profile) {
  TempDir d;
  const std::string latest = config_variant(d, "latest.json", "{\"name\": \"tt-sim\"}", "");
  expect_input_error(run_mha("run -c " + shell_quote(latest) + " -n 0"), "run it with tt_metal=2024");
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
  const std::string cfg = config_variant(d, "decode.json", "{\"name\": \"tt-sim\", \"tt_metal\": \"2024\"}",
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
