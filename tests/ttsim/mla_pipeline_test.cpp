// Multi-head latent attention on tt-sim (ttsim_mla.h): configs/
// mla_attention_ttsim.json (DeepSeek-V3's attention widths: kv_lora_rank 512,
// qk_rope 64, qk_nope 128, v 128; 8 heads, hidden 512) runs through
// flash_mla_prefill and tracks the reference backend's float64 output; the
// run names the ops; decode and attention "ops" are refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compare/compare.h"
#include "io/tensor_file.h"
#include "support/test_support.h"

using namespace mha;
using namespace mha::test;

namespace {

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

TEST(TtSimMla, DecodeAndOpsAreRefusedWithTheReason) {
  TempDir d;
  const std::string cfg = read_text(source_dir() + "/configs/mla_attention_ttsim.json");
  const std::string tt = "{\"name\": \"tt-sim\"}";
  ASSERT_NE(cfg.find(tt), std::string::npos);
  auto variant = [&](const std::string& name, const std::string& backend, const std::string& extra) {
    std::string c = cfg;
    c.replace(c.find(tt), tt.size(), backend + extra);
    write_text(d.file(name), c);
    return d.file(name);
  };
  expect_input_error(run_mha("run -c " + shell_quote(variant("ops.json", "{\"name\": \"tt-sim\", \"attention\": "
                                                                         "\"ops\"}", "")) + " -n 0"),
                     "flash_mla_prefill only");
  expect_input_error(run_mha("run -c " + shell_quote(variant("decode.json", tt, ", \"decode\": {\"prompt\": 90, "
                                                                             "\"tokens\": 6}")) + " -n 0"),
                     "flash-mla-decode");
}
