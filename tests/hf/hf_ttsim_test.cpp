// Issue 29 item 4 on the example folders tt-sim runs beyond the bundled
// two (tests/ttsim/hf_families_ttsim_test.cpp): Gemma 3's (1 + w) QK-norm,
// folded into the weight at load as tt_transformers' RMSNorm does, on every
// layer (sliding and global); and the refusals that stay, each naming why.
// tt-sim runs at its default tt_metal profile, latest, whose SDPA programs
// take the sliding window and flash MLA (the layers run through configs, as
// `mha run --hf DIR --seq 40 --batch 2` would).
#include <gtest/gtest.h>

#include "compare/compare.h"
#include "hf/hf_examples.h"
#include "io/tensor_file.h"

namespace mha::test {
namespace {

Tensor run_layer(const TempDir& d, const std::string& name, int layer, const std::string& backend) {
  const std::string out = d.file(backend + ".npy"), config = d.file(backend + ".json");
  write_text(config, R"({"model": {"hf": ")" + hf_example(name) + R"(", "layer": )" + std::to_string(layer) +
                         R"(}, "inputs": {"seed": 0, "x": {"randn": [2, 40, 64]}}, "backend": ")" + backend + "\"}");
  const CommandResult r = run_mha("run --config " + shell_quote(config) + " -n 0 --output " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return io::read_tensor(out);
}

TEST(HfTtSim, Gemma3OffsetQkNormTracksCpu) {
  TempDir d;
  for (int layer = 0; layer < 4; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const Tensor want = run_layer(d, "gemma3_text", layer, "cpu");
    const Tensor got = run_layer(d, "gemma3_text", layer, "tt-sim");
    EXPECT_GE(compare::compare(want, got, compare::Options{}).pcc, 0.99);
  }
}

// Kimi K2's layout (q_proj, biases, interleaved rope, YaRN) through
// flash_mla_prefill (docs/TTSIM.md "Flash MLA"): output PCC 0.99982 against
// cpu and the float64 reference (measured); the bound is the issue's 0.99
// tightened to what bf16 activations and bfloat8_b weights leave, 0.999.
// The deepseek_v3 folder's q_lora_rank 24 is not whole tiles: refused,
// naming the widths.
TEST(HfTtSim, KimiK2MlaTracksCpuThroughFlashMla) {
  TempDir d;
  const Tensor got = run_layer(d, "kimi_k2", 0, "tt-sim");
  for (const char* ref : {"cpu", "reference"})
    EXPECT_GE(compare::compare(run_layer(d, "kimi_k2", 0, ref), got, compare::Options{}).pcc, 0.999) << ref;
  const CommandResult r = run_mha("run --hf " + shell_quote(hf_example("deepseek_v3")) + " -n 0 --backend tt-sim");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("q_lora_rank in whole tiles"), std::string::npos) << r.err;
}

// Kimi K2's layer 1 decodes on tt-sim over its device latent cache
// (bfloat16): 24-token prompt, 16 steps of flash_multi_latent_attention_decode,
// two users; the decoded rows track cpu's (measured PCC 0.99975, the
// prompt's 0.99980).
TEST(HfTtSim, KimiK2DecodesThroughFlashMlaDecode) {
  TempDir d;
  Tensor y[2];
  for (int i = 0; i < 2; ++i) {
    const std::string backend =
        i == 0 ? R"("cpu")" : R"({"name": "tt-sim", "kv_cache_dtype": "bfloat16"})";
    write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("kimi_k2") + R"(", "layer": 1},
      "inputs": {"seed": 0, "x": {"randn": [2, 40, 64]}}, "decode": {"prompt": 24, "tokens": 16},
      "runs": {"iterations": 0}, "backend": )" + backend + "}");
    const CommandResult r = run_mha("run --config " + shell_quote(d.file("c.json")) + " -o " + shell_quote(d.file("y.npy")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("16 steps"), std::string::npos) << r.out;
    y[i] = io::read_tensor(d.file("y.npy"));
  }
  const std::vector<float> a = y[0].to_f32(), b = y[1].to_f32();
  std::vector<float> da, db;
  for (int64_t u = 0; u < 2; ++u) {  // rows 24.. of each user
    da.insert(da.end(), a.begin() + (u * 40 + 24) * 64, a.begin() + (u + 1) * 40 * 64);
    db.insert(db.end(), b.begin() + (u * 40 + 24) * 64, b.begin() + (u + 1) * 40 * 64);
  }
  const Shape s{2, 16, 64};
  EXPECT_GE(compare::compare(Tensor::from_f32(s, da), Tensor::from_f32(s, db), compare::Options{}).pcc, 0.999);
}

TEST(HfTtSim, SoftcapAndPartialRotaryStayRefused) {
  const struct {
    const char* name;
    const char* why;
  } cases[] = {{"gemma2", "TT-NN's SDPA has no softcap"}, {"phi3", "partial rotary"}};
  for (const auto& c : cases) {
    const CommandResult r = run_mha("run --hf " + shell_quote(hf_example(c.name)) + " -n 0 --backend tt-sim");
    EXPECT_EQ(r.exit_code, 2) << c.name;
    EXPECT_NE(r.err.find(c.why), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace mha::test
