// `mha run --backend-option KEY=VALUE`: backend options for --hf runs, which
// have no config to hold them, and over a config's own (a flag's key
// replaces the config's; -b naming another backend still drops the config's
// options). The options are the backend's declared ones, checked before any
// work: a bad key or value is one line naming it and what is expected.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

using namespace mha::test;

namespace {

// Layer 0 of the bundled Qwen3 folder (a full-attention layer, which tt-sim
// runs at both profiles) on tt-sim, one thread, the first run only.
std::string hf_tt_run(const std::string& extra) {
  return "run --hf " + shell_quote(data_file("hf_qwen3_tiny")) + " --layer 0 -n 0 --backend tt-sim " + extra;
}

nlohmann::json json_report(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// A tiny llama_attention config in dir/name with the given backend object.
std::string tt_config(const TempDir& dir, const std::string& name, const std::string& backend) {
  const std::string path = dir.file(name);
  write_text(path, R"({"variant": "llama_attention", "params": {"hidden_size": 64, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 32, "rope_theta": 10000.0, "attention_bias": false,
    "max_position_embeddings": 64}, "weights": {"init": "torch", "seed": 0},
    "inputs": {"seed": 0, "x": {"randn": [1, 32, 64]}}, "backend": )" + backend + "}");
  return path;
}

}  // namespace

TEST(RunBackendOption, PicksTheTtMetalProfileOfAnHfRun) {
  for (const char* profile : {"2024", "latest"}) {
    const nlohmann::json j =
        json_report(run_mha(hf_tt_run("--backend-option tt_metal=" + std::string(profile) + " --backend-option threads=1 --json -")));
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], profile);
    EXPECT_EQ(j["backend_info"]["threads"], 1);
  }
  // The text report names it too.
  const CommandResult r = run_mha(hf_tt_run("--backend-option tt_metal=2024 --backend-option threads=1"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tt_metal: 2024 ("), std::string::npos) << r.out;
}

TEST(RunBackendOption, BadKeyOrValueIsOneLineBeforeAnyWork) {
  TempDir dir;
  const std::string out = " --output " + shell_quote(dir.file("o.npy"));
  // The key, and the keys tt-sim takes.
  CommandResult r = run_mha(hf_tt_run("--backend-option bogus=1" + out));
  expect_input_error(r, "--backend-option: backend.bogus: unknown");
  EXPECT_NE(r.err.find("tt_metal"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("threads"), std::string::npos) << r.err;
  // The value, and the values the key takes.
  r = run_mha(hf_tt_run("--backend-option tt_metal=2023" + out));
  expect_input_error(r, "--backend-option: backend.tt_metal");
  EXPECT_NE(r.err.find("latest"), std::string::npos) << r.err;
  expect_input_error(run_mha(hf_tt_run("--backend-option threads=0" + out)), "--backend-option: backend.threads");
  expect_input_error(run_mha(hf_tt_run("--backend-option tt_metal" + out)), "--backend-option: expected KEY=VALUE");
  expect_input_error(run_mha(hf_tt_run("--backend-option =2024" + out)), "--backend-option: expected KEY=VALUE");
  // Another backend's option: cpu takes no tt_metal.
  expect_input_error(run_mha("run --hf " + shell_quote(data_file("hf_qwen3_tiny")) +
                             " -n 0 --backend cpu --backend-option tt_metal=2024" + out),
                     "--backend-option: backend.tt_metal: unknown key for backend 'cpu'");
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.npy")));
}

TEST(RunBackendOption, OverridesAndAddsToTheConfigsOptions) {
  TempDir dir;
  const std::string config = tt_config(dir, "c.json", R"({"name": "tt-sim", "tt_metal": "2024", "threads": 1})");
  const std::string run = "run -n 0 --json - --config " + shell_quote(config);
  nlohmann::json j = json_report(run_mha(run));
  EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], "2024");
  // The flag's key replaces the config's; the config's other keys stay.
  j = json_report(run_mha(run + " --backend-option tt_metal=latest"));
  EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], "latest");
  EXPECT_EQ(j["backend_info"]["threads"], 1);
  // A key the config lacks is added.
  j = json_report(run_mha(run + " --backend-option kernels=scalar"));
  EXPECT_EQ(j["backend_info"]["simd"], "scalar");
  EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], "2024");
  // -b cpu drops the config's tt-sim options; the flag's are cpu's.
  j = json_report(run_mha(run + " -b cpu --backend-option threads=1"));
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["backend_info"]["threads"], 1);
  // A bad value in the config that the flag replaces no longer matters; one
  // the flag leaves is the config's error, named by the config's path.
  const std::string bad = tt_config(dir, "bad.json", R"({"name": "tt-sim", "tt_metal": "2023"})");
  j = json_report(run_mha("run -n 0 --json - --config " + shell_quote(bad) + " --backend-option tt_metal=2024"));
  EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], "2024");
  expect_input_error(run_mha("run -n 0 --config " + shell_quote(bad) + " --backend-option threads=1"),
                     bad + ": backend.tt_metal");
}

// One parser for every KEY=VALUE flag: a value nested past 64 levels is
// refused on its text, before it is parsed (a command-line argument is at
// most 128 KiB, hence 30000 levels).
TEST(RunBackendOption, DeepValueIsRefusedAsBenchAndOpRefuseIt) {
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  expect_input_error(run_mha(hf_tt_run("--backend-option threads=" + deep)),
                     "--backend-option: value nests deeper than 64 levels");
  expect_input_error(run_mha("op exp x.npy -o y.npy --option threads=" + deep), "--option: value nests deeper than 64 levels");
}
