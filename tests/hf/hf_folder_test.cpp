// Issue 29 item 1: a Hugging Face folder as the model. Every family's
// example folder (scripts/make_hf_example.py) loads through `mha run --hf`
// and a config's "model" key; `mha inspect DIR` says what each layer's
// attention is (sliding or full, window, rope base and scaling, QK-norm,
// softcap, sinks), by layer_types or the family's own rule.
#include <gtest/gtest.h>

#include <filesystem>

#include "hf/hf_examples.h"
#include "io/tensor_file.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

const char* const kFamilies[] = {"llama",   "llama31",     "mistral",   "qwen2",   "qwen2_yarn", "qwen3", "qwen3_sharded",
                                 "gemma2",  "gemma3_text", "gemma3_mm", "gpt_oss", "phi3"};

// Every folder runs, on layer 1, from the flags alone: x randn [1, 16, hidden].
TEST(HfFolder, EveryFamilyRunsFromTheFlags) {
  TempDir out;
  for (const char* name : kFamilies) {
    SCOPED_TRACE(name);
    const CommandResult r = run_mha("run --hf " + shell_quote(hf_example(name)) + " --layer 1 -n 0 --backend reference " +
                                    "--output " + shell_quote(out.file("o.npy")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("layer 1 of"), std::string::npos) << r.out;
    EXPECT_EQ(io::read_tensor(out.file("o.npy")).shape(), (Shape{1, 16, 64}));
  }
}

TEST(HfFolder, HfCacheSymlinksAreFollowed) {
  ASSERT_TRUE(fs::is_symlink(hf_cache_snapshot() + "/config.json"));
  TempDir out;
  const CommandResult r = run_mha("run --hf " + shell_quote(hf_cache_snapshot()) + " --layer 0 --seq 5 --batch 2 -n 0 " +
                                  "--output " + shell_quote(out.file("o.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(io::read_tensor(out.file("o.npy")).shape(), (Shape{2, 5, 64}));
  EXPECT_EQ(hf_inspect(hf_cache_snapshot())["layers"].size(), 2u);
}

// The config's "model" key replaces variant / params / weights; its inputs
// are the config's as ever.
TEST(HfFolder, ConfigModelKey) {
  TempDir d;
  write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("qwen3") +
                                   R"(", "layer": 2}, "inputs": {"seed": 4, "x": {"randn": [1, 7, 64]}}})");
  CommandResult r = run_mha("run -n 0 --config " + shell_quote(d.file("c.json")) + " --output " + shell_quote(d.file("o.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(io::read_tensor(d.file("o.npy")).shape(), (Shape{1, 7, 64}));
  write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("qwen3") + R"("}, "variant": "llama_attention"})");
  expect_one_line_error(run_mha("run --config " + shell_quote(d.file("c.json"))), "\"model\" replaces variant");
  write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("qwen3") + R"(", "layers": 1}})");
  expect_one_line_error(run_mha("run --config " + shell_quote(d.file("c.json"))), "model.layers");
}

// A decode config works with "model" too: x defaults to prompt + tokens rows.
TEST(HfFolder, DecodeConfigWithModel) {
  TempDir d;
  write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("mistral") +
                                   R"(", "layer": 1}, "decode": {"prompt": 3, "tokens": 4}})");
  const CommandResult r = run_mha("run -n 0 --config " + shell_quote(d.file("c.json")) + " --output " + shell_quote(d.file("o.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(io::read_tensor(d.file("o.npy")).shape(), (Shape{1, 7, 64}));
}

struct LayerWant {
  const char* type;
  int64_t window;
  double theta;
  const char* scaling;
};

void expect_layers(const std::string& name, const std::vector<LayerWant>& want) {
  SCOPED_TRACE(name);
  const nlohmann::json j = hf_inspect(hf_example(name));
  ASSERT_EQ(j["layers"].size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const nlohmann::json& l = j["layers"][i];
    EXPECT_EQ(l["type"], want[i].type);
    EXPECT_EQ(l["window"], want[i].window);
    EXPECT_EQ(l["rope_theta"].get<double>(), want[i].theta);
    EXPECT_EQ(l["rope_scaling"], want[i].scaling);
  }
}

// Sliding or full by layer_types or the family's rule; Gemma 3's local base
// (and no scaling) on its sliding layers.
TEST(HfFolder, LayerTypesAndLocalBase) {
  expect_layers("gemma2", {{"sliding", 4, 1e4, "default"}, {"full", 0, 1e4, "default"},
                           {"sliding", 4, 1e4, "default"}, {"full", 0, 1e4, "default"}});
  expect_layers("gemma3_text", {{"sliding", 4, 1e4, "default"}, {"sliding", 4, 1e4, "default"},
                                {"full", 0, 1e6, "linear"}, {"sliding", 4, 1e4, "default"}});
  // text_config omits sliding_window_pattern: Gemma 3's 5:1 (the 6th layer full).
  expect_layers("gemma3_mm", {{"sliding", 4, 1e4, "default"}, {"sliding", 4, 1e4, "default"}, {"sliding", 4, 1e4, "default"},
                              {"sliding", 4, 1e4, "default"}, {"sliding", 4, 1e4, "default"}, {"full", 0, 1e6, "linear"}});
  expect_layers("gpt_oss", {{"sliding", 4, 150000, "yarn"}, {"full", 0, 150000, "yarn"}});
  expect_layers("qwen3", {{"full", 0, 1e6, "default"}, {"sliding", 5, 1e6, "default"}, {"sliding", 5, 1e6, "default"}});
  expect_layers("qwen3_sharded", {{"full", 0, 1e6, "default"}, {"sliding", 5, 1e6, "default"}, {"sliding", 5, 1e6, "default"}});
  expect_layers("mistral", {{"sliding", 5, 1e6, "default"}, {"sliding", 5, 1e6, "default"}});
  expect_layers("llama31", {{"full", 0, 5e5, "llama3"}, {"full", 0, 5e5, "llama3"}});
  expect_layers("qwen2_yarn", {{"full", 0, 1e6, "yarn"}, {"full", 0, 1e6, "yarn"}});
}

// The rest of what a layer's attention is: scale, softcap, QK-norm, sinks,
// rotary width, YaRN's attention factor, and where its tensors are.
TEST(HfFolder, InspectSaysWhatEachLayerIs) {
  const nlohmann::json g2 = hf_inspect(hf_example("gemma2"))["layers"][0];
  EXPECT_DOUBLE_EQ(g2["scale"].get<double>(), 1.0 / std::sqrt(24.0));  // query_pre_attn_scalar, not head_dim
  EXPECT_EQ(g2["softcap"], 5.0);
  EXPECT_EQ(g2["head_dim"], 32);
  const nlohmann::json mm = hf_inspect(hf_example("gemma3_mm"))["layers"][5];
  EXPECT_EQ(mm["prefix"], "language_model.model.layers.5.self_attn.");
  EXPECT_DOUBLE_EQ(mm["scale"].get<double>(), 1.0 / 16.0);  // query_pre_attn_scalar's default, 256
  EXPECT_EQ(mm["qk_norm"], "1+w");
  EXPECT_EQ(mm["softcap"], 0.0);
  const nlohmann::json q3 = hf_inspect(hf_example("qwen3"))["layers"][0];
  EXPECT_EQ(q3["qk_norm"], "w");
  EXPECT_EQ(q3["head_dim"], 32);  // independent of hidden / heads (16)
  const nlohmann::json oss = hf_inspect(hf_example("gpt_oss"))["layers"][1];
  EXPECT_EQ(oss["sinks"], true);
  EXPECT_NEAR(oss["rope_attention_factor"].get<double>(), 0.1 * std::log(32.0) + 1.0, 1e-12);
  EXPECT_EQ(hf_inspect(hf_example("phi3"))["layers"][0]["rotary_dim"], 12);  // 0.75 x 16
  const nlohmann::json y = hf_inspect(hf_example("qwen2_yarn"))["layers"][0];
  EXPECT_NEAR(y["rope_attention_factor"].get<double>(), 0.1 * std::log(4.0) + 1.0, 1e-12);
  const CommandResult text = run_mha("inspect " + shell_quote(hf_example("gemma3_text")));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("gemma3_text"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("layer   2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("qk-norm (1+w)"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace mha::test

namespace mha::test {
namespace {

// `mha bench --hf`: pp and tg rows of the folder's layer at its own shape
// (Gemma 3's head_dim 32 is not hidden / heads), and the shape flags refused
// beside it.
TEST(HfFolder, BenchRowsOfALayer) {
  const std::string bench = "bench --no-progress --probe-mib 16 -r 1 --warmup 0 -t 1 -o json --hf " +
                            shell_quote(hf_example("gemma3_text")) + " --layer 2 ";
  const CommandResult r = run_mha(bench + "-p 8 -n 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& rows = j.is_array() ? j : j["rows"];
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (const nlohmann::json& row : rows) {
    EXPECT_EQ(row["hidden"], 64) << row;
    EXPECT_EQ(row["heads"], 4) << row;
    EXPECT_EQ(row["kv_heads"], 2) << row;
  }
  expect_one_line_error(run_mha(bench + "-p 8 --hidden 128"), "--hf: the folder's layer sets the variant and shape");
  expect_one_line_error(run_mha("bench --no-progress -p 8 --hf " + shell_quote(hf_example("gemma3_text")) + " --layer 9"),
                        "layer 9 is out of range");
}

}  // namespace
}  // namespace mha::test

namespace mha::test {
namespace {

// DeepSeek-V3's MLA layers (and its multi-token-prediction layer past
// num_hidden_layers) in inspect, and a tg row reading the weights and one
// latent row per cached position.
TEST(HfFolder, MlaLayersInspectAndBench) {
  const nlohmann::json j = hf_inspect(hf_example("deepseek_v3"));
  ASSERT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["num_nextn_predict_layers"], 1);
  const nlohmann::json& l0 = j["layers"][0];
  EXPECT_EQ(l0["variant"], "mla_attention");
  EXPECT_EQ(l0["multi_token_prediction"], false);
  EXPECT_EQ(j["layers"][2]["multi_token_prediction"], true);
  EXPECT_EQ(l0["mla"]["kv_lora_rank"], 32);
  EXPECT_EQ(l0["mla"]["q_lora_rank"], 24);
  EXPECT_EQ(l0["mla"]["rope_interleave"], true);
  EXPECT_EQ(l0["rotary_dim"], 32);
  const double ms = 0.1 * std::log(40.0) + 1.0;  // mscale_all_dim 1 enters the scale squared
  EXPECT_NEAR(l0["scale"].get<double>(), ms * ms / std::sqrt(48.0), 1e-12);
  EXPECT_EQ(l0["rope_attention_factor"], 1.0);  // mscale / mscale_all_dim
  const nlohmann::json k = hf_inspect(hf_example("kimi_k2"))["layers"][0];
  EXPECT_EQ(k["mla"]["q_lora_rank"], 0);  // null: q_proj
  EXPECT_NEAR(k["rope_attention_factor"].get<double>(), (0.1 * std::log(32.0) + 1) / (0.08 * std::log(32.0) + 1), 1e-12);
  const CommandResult text = run_mha("inspect " + shell_quote(hf_example("deepseek_v3")));
  EXPECT_NE(text.out.find("2 layers + 1 multi-token prediction"), std::string::npos) << text.out;

  const CommandResult r = run_mha("bench --no-progress --probe-mib 16 -r 1 --warmup 0 -t 1 -o json --hf " +
                                  shell_quote(hf_example("deepseek_v3")) + " --layer 2 -p 0 -n 2 -d 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const nlohmann::json& rows = out.is_array() ? out : out["rows"];
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows[0]["variant"], "mla_attention");
  // q_a 24x64 (+ norm 24), q_b 192x24, kv_a_proj_with_mqa 64x64 (+ norm 32),
  // kv_b 160x32, o 64x96 floats; the cache holds 32 + 32 floats a position,
  // 9 and then 10 positions after the two steps.
  const double weights = 4.0 * (24 * 64 + 24 + 192 * 24 + 64 * 64 + 32 + 160 * 32 + 64 * 96);
  EXPECT_DOUBLE_EQ(rows[0]["bytes_per_token"].get<double>(), weights + 4.0 * 64 * (9 + 10) / 2.0);
  EXPECT_GT(rows[0]["bandwidth_percent"].get<double>(), 0);
}

// A sliding layer's tg row counts the window's rows a step reads, not the
// whole cache it holds: the bundled gpt-oss folder's layer 0 (window 4)
// against its full layer 1, the same weights. Each step's cache holds 9,
// then 10 positions of 2 kv heads x (k + v) x 32 floats; layer 0 reads 4.
TEST(HfFolder, SlidingLayersCountTheirWindowsBytes) {
  double bytes[2];
  for (int layer = 0; layer < 2; ++layer) {
    const CommandResult r = run_mha("bench --no-progress --probes none -r 1 --warmup 0 -t 1 -o json --hf " +
                                    shell_quote(source_dir() + "/data/hf_gpt_oss_tiny") + " --layer " +
                                    std::to_string(layer) + " -p 0 -n 2 -d 8");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    const nlohmann::json& rows = out.is_array() ? out : out["rows"];
    ASSERT_EQ(rows.size(), 1u) << r.out;
    bytes[layer] = rows[0]["bytes_per_token"].get<double>();
  }
  const double row = 4.0 * 2 * 2 * 32;
  EXPECT_DOUBLE_EQ(bytes[1] - bytes[0], row * ((9 + 10) / 2.0 - 4));
}

}  // namespace
}  // namespace mha::test
