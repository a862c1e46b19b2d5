// Issue 12 item 3: one layer out of a checkpoint in the Hugging Face layout
// (a sharded model.safetensors.index.json, bfloat16 / float16 weights, a name
// prefix), end to end through `mha run`: the output equals a run given the
// same weights directly, and every bad checkpoint is one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/tensor_file.h"
#include "support/test_support.h"
#include "variants/variant.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

const char* kParams = R"({"embed_dim": 8, "num_heads": 2, "batch_first": true})";
const char* kLayer1 = "model.layers.1.self_attn.";

// As a checkpoint stores them: projections in bfloat16, the output projection
// in float16, biases in float32.
Tensor stored(const std::string& name, const Tensor& t) {
  if (name == "in_proj_weight") return t.cast(DType::BF16);
  if (name == "out_proj.weight") return t.cast(DType::F16);
  return t;
}

// Two torch_mha layers (seeds 10, 11) under model.layers.L.self_attn., plus an
// embedding, in three shards: embeddings and layer 0; layer 1's in_proj; layer
// 1's out_proj. `layer1` receives layer 1's stored tensors (unprefixed).
struct Checkpoint {
  TempDir dir;
  NamedTensors layer1;
  nlohmann::ordered_json index;
  std::string shard(int i) const { return dir.file("model-0000" + std::to_string(i) + "-of-00003.safetensors"); }
  std::string index_path() const { return dir.file("model.safetensors.index.json"); }
  void write_index() const { write_text(index_path(), index.dump(2)); }

  Checkpoint() {
    auto v = make_variant("torch_mha", nlohmann::ordered_json::parse(kParams));
    std::vector<NamedTensors> shards(3);
    shards[0].emplace_back("model.embed_tokens.weight", Tensor::from_f32({4, 8}, std::vector<float>(32, 0.5f)));
    for (int layer = 0; layer < 2; ++layer) {
      for (const auto& [name, t] : v->init_torch(10 + layer)) {
        const std::string full = "model.layers." + std::to_string(layer) + ".self_attn." + name;
        const int s = layer == 0 ? 0 : (name.rfind("in_proj", 0) == 0 ? 1 : 2);
        shards[s].emplace_back(full, stored(name, t));
        if (layer == 1) layer1.emplace_back(name, stored(name, t));
      }
    }
    index["metadata"] = {{"total_size", 0}};
    for (int s = 0; s < 3; ++s) {
      io::write_safetensors(shard(s + 1), shards[s]);
      for (const auto& nt : shards[s]) index["weight_map"][nt.first] = fs::path(shard(s + 1)).filename().string();
    }
    write_index();
  }
};

std::string config(const std::string& weights) {
  return std::string(R"({"variant": "torch_mha", "params": )") + kParams + R"(, "weights": )" + weights +
         R"(, "inputs": {"seed": 3, "query": {"randn": [2, 5, 8]}, "key": {"randn": [2, 5, 8]}, "value": {"randn": [2, 5, 8]}}})";
}

std::string weights(const std::string& file, const std::string& prefix = "") {
  nlohmann::json w = {{"file", file}};
  if (!prefix.empty()) w["prefix"] = prefix;
  return w.dump();
}

// Runs the config; returns the output .npy's bytes ("" when the run failed).
std::string run_output(const TempDir& dir, const std::string& cfg, const std::string& backend = "cpu") {
  write_text(dir.file("c.json"), cfg);
  fs::remove(dir.file("o.npy"));
  CommandResult r = run_mha("run -n 1 --backend " + backend + " --config " + shell_quote(dir.file("c.json")) +
                            " --output " + shell_quote(dir.file("o.npy")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? read_text(dir.file("o.npy")) : "";
}

void expect_error(const TempDir& dir, const std::string& cfg, const std::string& needle) {
  write_text(dir.file("c.json"), cfg);
  CommandResult r = run_mha("run -n 1 --config " + shell_quote(dir.file("c.json")) + " --output " +
                            shell_quote(dir.file("bad.npy")));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected one line: " << r.err;
  EXPECT_FALSE(fs::exists(dir.file("bad.npy")));
}

TEST(Checkpoint, PrefixedLayerOfAShardedHalfPrecisionCheckpointEqualsTheSameWeightsGivenDirectly) {
  Checkpoint ck;
  TempDir run;
  // The same values, widened to float32 in a file of their own.
  NamedTensors direct;
  for (const auto& [name, t] : ck.layer1) direct.emplace_back(name, t.cast(DType::F32));
  io::write_safetensors(run.file("direct.safetensors"), direct);
  for (const char* backend : {"cpu", "reference"}) {
    SCOPED_TRACE(backend);
    const std::string want = run_output(run, config(weights(run.file("direct.safetensors"))), backend);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(run_output(run, config(weights(ck.index_path(), kLayer1)), backend), want);
    // A shard named directly: its index is followed to layer 1's other shard.
    EXPECT_EQ(run_output(run, config(weights(ck.shard(2), kLayer1)), backend), want);
    // The half-precision tensors themselves, unsharded and unprefixed.
    io::write_safetensors(run.file("half.safetensors"), ck.layer1);
    EXPECT_EQ(run_output(run, config(weights(run.file("half.safetensors"))), backend), want);
    // A prefix works on .npz too (numpy has no bfloat16: the npz holds the widened values).
    NamedTensors prefixed = {{"other.weight", Tensor::from_f32({2}, {1, 2})}};
    for (const auto& [name, t] : direct) prefixed.emplace_back(std::string(kLayer1) + name, t);
    io::write_npz(run.file("w.npz"), prefixed);
    EXPECT_EQ(run_output(run, config(weights(run.file("w.npz"), kLayer1)), backend), want);
  }
}

TEST(Checkpoint, OnlyTheShardsHoldingTheLayerAreRead) {
  Checkpoint ck;
  TempDir run;
  const std::string want = run_output(run, config(weights(ck.index_path(), kLayer1)));
  write_text(ck.shard(1), "not a safetensors file");  // layer 0 and the embeddings
  EXPECT_EQ(run_output(run, config(weights(ck.index_path(), kLayer1))), want);
  expect_error(run, config(weights(ck.index_path(), "model.layers.0.self_attn.")), "model-00001-of-00003.safetensors");
}

TEST(Checkpoint, PrefixErrorsNameThePrefixTheFileAndWhatWasFound) {
  Checkpoint ck;
  TempDir run;
  expect_error(run, config(weights(ck.index_path(), "model.layers.7.self_attn.")),
               "weights.prefix 'model.layers.7.self_attn.' matches none of its 9 tensors (closest: 'model.layers.");
  expect_error(run, config(weights(ck.index_path(), "model.layers.1.")),
               "weights.prefix 'model.layers.1.' leaves weight 'in_proj_weight' of shape (24, 8) of variant torch_mha "
               "missing (expected 'model.layers.1.in_proj_weight'; found with that prefix: 'self_attn.");
  // Without a prefix every tensor must be a weight of the variant.
  expect_error(run, config(weights(ck.index_path())),
               "model.safetensors.index.json: no tensor 'in_proj_weight' of variant torch_mha, but 2 end with it "
               "('model.layers.0.self_attn.in_proj_weight', 'model.layers.1.self_attn.in_proj_weight'): pick one layer "
               "with weights.prefix, e.g. \"model.layers.0.self_attn.\"");
  NamedTensors extra = ck.layer1;
  extra.emplace_back("model.embed_tokens.weight", Tensor::from_f32({2}, {1, 2}));
  io::write_safetensors(run.file("extra.safetensors"), extra);
  expect_error(run, config(weights(run.file("extra.safetensors"))), "unexpected tensor 'model.embed_tokens.weight'");
  expect_error(run, config(R"({"file": "x.safetensors", "prefix": ""})"), "weights.prefix: expected a non-empty");
  expect_error(run, config(R"({"file": "x.safetensors", "prefix": 3})"), "weights.prefix: expected a string");
  // A misshapen or non-float tensor under the prefix is still an error.
  NamedTensors bad = ck.layer1;
  bad[0].second = Tensor(DType::I32, bad[0].second.shape());
  for (auto& nt : bad) nt.first = kLayer1 + nt.first;
  io::write_safetensors(run.file("bad.safetensors"), bad);
  expect_error(run, config(weights(run.file("bad.safetensors"), kLayer1)), "expected a floating-point dtype, found int32");
}

TEST(Checkpoint, BadIndexesAreOneLineErrors) {
  Checkpoint ck;
  TempDir run;
  const std::string cfg = config(weights(ck.index_path(), kLayer1));
  const nlohmann::ordered_json good = ck.index;
  auto with = [&](const std::string& key, const nlohmann::ordered_json& value) {
    ck.index = good;
    ck.index["weight_map"][key] = value;
    ck.write_index();
  };
  const std::string w = std::string(kLayer1) + "out_proj.weight";
  with(w, "model-00009-of-00009.safetensors");
  expect_error(run, cfg, "weight_map maps '" + w + "' to shard " + ck.dir.file("model-00009-of-00009.safetensors") +
                             ", which does not exist");
  with(w, "model-00001-of-00003.safetensors");
  expect_error(run, cfg, "weight_map maps '" + w + "' to shard " + ck.shard(1) + ", which holds no such tensor");
  with(w, "../model-00003-of-00003.safetensors");
  expect_error(run, cfg, "weight_map." + w + ": shard path \"../model-00003-of-00003.safetensors\" leaves the index's folder");
  with(w, "/etc/passwd");
  expect_error(run, cfg, "leaves the index's folder");
  with(w, "sub/../../x.safetensors");
  expect_error(run, cfg, "leaves the index's folder");
  with(w, 5);
  expect_error(run, cfg, "weight_map." + w + ": expected a shard file name, found 5");
  ck.index = good;
  ck.index["weight_map"] = nlohmann::ordered_json::array();
  ck.write_index();
  expect_error(run, cfg, "checkpoint index: expected \"weight_map\"");
  ck.index = good;
  ck.index["metadata"] = 1;
  ck.write_index();
  expect_error(run, cfg, "\"metadata\" is not a JSON object");
  write_text(ck.index_path(), "{\"weight_map\": {");
  expect_error(run, cfg, "model.safetensors.index.json: invalid JSON");
  write_text(ck.index_path(), std::string(100, '[') + std::string(100, ']'));
  expect_error(run, cfg, "checkpoint index nests deeper than 64 levels");
  fs::remove(ck.index_path());
  expect_error(run, cfg, "model.safetensors.index.json: cannot open");
}

TEST(Checkpoint, BundledConfigMatchesTorch) {
  // configs/checkpoint_prefix_torch_mha.json carries torch's output of the layer as its reference.
  for (const char* backend : {"cpu", "reference"}) {
    CommandResult r = run_mha("run -n 1 --backend " + std::string(backend) + " --config " +
                              shell_quote(source_dir() + "/configs/checkpoint_prefix_torch_mha.json"));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS: 0 of 1 checks failed"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace mha::test
