// Issue 29 item 4 on tt-sim: the bundled Qwen3 folder (QK-norm through
// ttnn.rms_norm) and gpt-oss folder (sinks through SDPA's attention_sink,
// sliding and full layers through sliding_window_size) run `mha run --hf
// --backend tt-sim` on every layer, PCC >= 0.99 against cpu, and
// --compare-stages works; decode runs too. Softcap is still refused.
#include <gtest/gtest.h>

#include "compare/compare.h"
#include "io/tensor_file.h"
#include "support/test_support.h"

using namespace mha;
using namespace mha::test;

namespace {

Tensor run_layer(const TempDir& d, const std::string& folder, int layer, const std::string& backend,
                 const std::string& extra = "") {
  const std::string out = d.file(backend + std::to_string(layer) + ".npy");
  const CommandResult r = run_mha("run --hf " + shell_quote(source_dir() + "/data/" + folder) + " --layer " +
                                  std::to_string(layer) + " --seq 40 --batch 2 -n 0 --backend " + backend + " " +
                                  extra + " --output " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return io::read_tensor(out);
}

void check_folder(const std::string& folder, int layers) {
  TempDir d;
  for (int layer = 0; layer < layers; ++layer) {
    SCOPED_TRACE(folder + " layer " + std::to_string(layer));
    const Tensor want = run_layer(d, folder, layer, "cpu"), got = run_layer(d, folder, layer, "tt-sim");
    const double pcc = compare::compare(want, got, compare::Options{}).pcc;
    std::cout << folder << " layer " << layer << ": PCC " << pcc << "\n";
    EXPECT_GE(pcc, 0.99);
    const CommandResult st = run_mha("run --hf " + shell_quote(source_dir() + "/data/" + folder) + " --layer " +
                                     std::to_string(layer) + " --seq 40 -n 0 --backend tt-sim --compare-stages");
    EXPECT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(st.out.find("context"), std::string::npos) << st.out;
  }
}

}  // namespace

TEST(TtSimHfFamilies, Qwen3QkNormTracksCpu) { check_folder("hf_qwen3_tiny", 3); }

TEST(TtSimHfFamilies, GptOssSinksAndWindowsTrackCpu) { check_folder("hf_gpt_oss_tiny", 2); }

TEST(TtSimHfFamilies, BundledDecodeConfigRuns) {
  const CommandResult r =
      run_mha("run --config " + shell_quote(source_dir() + "/configs/hf_gpt_oss_tiny.json") + " -n 0 --backend tt-sim");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}
