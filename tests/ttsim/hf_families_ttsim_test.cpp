// Issue 29 item 4 on tt-sim: the bundled Qwen3 folder (QK-norm through
// ttnn.rms_norm) and gpt-oss folder (sinks through SDPA's attention_sink,
// sliding and full layers through sliding_window_size) run `mha run --hf
// --backend tt-sim` on every layer, PCC >= 0.99 against cpu, and
// --compare-stages works; decode runs too. Softcap is still refused. tt-sim
// runs at its default tt_metal profile, latest, whose SDPA programs take the
// window and the sink (the layers run through configs, as `mha run --hf DIR
// --seq 40 --batch 2` would).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "compare/compare.h"
#include "io/tensor_file.h"
#include "support/test_support.h"

using namespace mha;
using namespace mha::test;

namespace {

// `mha run --hf DIR --layer L --seq S --batch B` as a config (hidden 64 in
// both folders).
std::string layer_config(const TempDir& d, const std::string& folder, int layer, const std::string& backend,
                         int64_t batch) {
  const std::string path = d.file(folder + backend + std::to_string(layer) + ".json");
  write_text(path, R"({"model": {"hf": ")" + source_dir() + "/data/" + folder + R"(", "layer": )" +
                       std::to_string(layer) + R"(}, "inputs": {"seed": 0, "x": {"randn": [)" + std::to_string(batch) +
                       R"(, 40, 64]}}, "backend": ")" + backend + "\"}");
  return shell_quote(path);
}

Tensor run_layer(const TempDir& d, const std::string& folder, int layer, const std::string& backend) {
  const std::string out = d.file(backend + std::to_string(layer) + ".npy");
  const CommandResult r =
      run_mha("run --config " + layer_config(d, folder, layer, backend, 2) + " -n 0 --output " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return io::read_tensor(out);
}

// min_pcc per layer.
void check_folder(const std::string& folder, const std::vector<double>& min_pcc) {
  TempDir d;
  for (int layer = 0; layer < static_cast<int>(min_pcc.size()); ++layer) {
    SCOPED_TRACE(folder + " layer " + std::to_string(layer));
    const Tensor want = run_layer(d, folder, layer, "cpu"), got = run_layer(d, folder, layer, "tt-sim");
    const double pcc = compare::compare(want, got, compare::Options{}).pcc;
    std::cout << folder << " layer " << layer << ": PCC " << pcc << "\n";
    EXPECT_GE(pcc, min_pcc[static_cast<size_t>(layer)]);
    const CommandResult st =
        run_mha("run --config " + layer_config(d, folder, layer, "tt-sim", 1) + " -n 0 --compare-stages");
    EXPECT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(st.out.find("context"), std::string::npos) << st.out;
  }
}

}  // namespace

TEST(TtSimHfFamilies, Qwen3QkNormTracksCpu) { check_folder("hf_qwen3_tiny", {0.99, 0.99, 0.99}); }

// TT-NN's gpt-oss attention passes SDPA sinks / scale in prefill and decode
// alike (models/demos/gpt_oss/tt/attention/weights.py, docs/TTSIM.md
// "gpt-oss"): both kernels multiply the sink by the scale as they do the
// scores, so the device's sink logit is transformers' sink. Measured at 40
// tokens: PCC 0.99981 on the sliding layer (4 keys per query: the sink
// weighs most) and 0.99984 on the full layer; the raw sinks, as that code
// passed them before, gave 0.98541 and 0.99871.
TEST(TtSimHfFamilies, GptOssSinksAndWindowsTrackCpu) {
  check_folder("hf_gpt_oss_tiny", {0.99, 0.99});
  // The run's report says how the sinks were passed.
  TempDir d;
  const CommandResult r = run_mha("run --config " + layer_config(d, "hf_gpt_oss_tiny", 0, "tt-sim", 1) + " -n 0 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sinks / scale"), std::string::npos) << r.out;
}

// Rows [r0, L) of y [1, L, E].
Tensor rows_from(const Tensor& y, int64_t r0) {
  const int64_t L = y.dim(1), E = y.dim(2);
  Tensor t(DType::F32, {1, L - r0, E});
  std::copy_n(y.data<float>() + r0 * E, (L - r0) * E, t.data<float>());
  return t;
}

// Decode: the prompt prefilled into the device cache, then one SDPA decode
// step per token with QK-norm, the window and the sinks / scale (which is
// what transformers computes: decoded rows within PCC 0.999 of cpu's;
// measured 0.9995-0.99984), on both layer types of both folders.
TEST(TtSimHfFamilies, DecodeTracksCpu) {
  TempDir d;
  for (const char* folder : {"hf_gpt_oss_tiny", "hf_qwen3_tiny"})
    for (int layer : {0, 1}) {
      SCOPED_TRACE(std::string(folder) + " layer " + std::to_string(layer));
      Tensor y[2];
      for (int i = 0; i < 2; ++i) {
        const std::string backend =
            i == 0 ? R"("cpu")" : R"({"name": "tt-sim", "kv_cache_dtype": "bfloat16"})";
        write_text(d.file("c.json"), R"({"model": {"hf": ")" + source_dir() + "/data/" + folder + R"(", "layer": )" +
                                         std::to_string(layer) + R"(}, "inputs": {"seed": 0, "x": {"randn": [1, 40, 64]}},
           "decode": {"prompt": 24, "tokens": 16}, "runs": {"iterations": 0}, "backend": )" + backend + "}");
        const CommandResult r = run_mha("run --config " + shell_quote(d.file("c.json")) + " -o " + shell_quote(d.file("y.npy")));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("16 steps"), std::string::npos) << r.out;
        y[i] = io::read_tensor(d.file("y.npy"));
      }
      EXPECT_GE(compare::compare(rows_from(y[0], 24), rows_from(y[1], 24), compare::Options{}).pcc, 0.999);
    }
}
