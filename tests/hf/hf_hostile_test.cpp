// Issue 29: a hostile or unsupported config.json (unknown model_type, MLA,
// fields contradicting the tensors, huge dimensions, a layer out of range,
// missing tensors, a shard outside the folder, attention fields mha does not
// run) is one line and exit 2, before any large allocation, reading nothing
// outside the folder but what its symlinks name.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "hf/hf_examples.h"
#include "io/tensor_file.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A copy of example `name` whose config.json `edit` changed.
struct Edited {
  TempDir dir;
  std::string model() const { return dir.file("m"); }
  Edited(const std::string& name, const std::function<void(json&)>& edit) {
    fs::copy(hf_example(name), model(), fs::copy_options::recursive);
    json cfg = json::parse(read_text(model() + "/config.json"));
    edit(cfg);
    fs::remove(model() + "/config.json");
    write_text(model() + "/config.json", cfg.dump(2));
  }
};

CommandResult run_hf(const std::string& dir, const std::string& flags = "--layer 0") {
  return run_mha("run -n 0 --hf " + shell_quote(dir) + " " + flags);
}

TEST(HfHostile, UnknownModelType) {
  Edited e("llama", [](json& c) { c["model_type"] = "mamba"; });
  expect_one_line_error(run_hf(e.model()), "model_type \"mamba\" is not supported");
  expect_one_line_error(run_mha("inspect " + shell_quote(e.model())), "model_type \"mamba\"");
}

// Other MLA layouts, and MLA's keys under a family without MLA.
TEST(HfHostile, OtherMlaIsRefusedInOneLine) {
  Edited e("deepseek_v3", [](json& c) { c["model_type"] = "deepseek_v2"; });
  expect_one_line_error(run_hf(e.model()), "model_type \"deepseek_v2\": this multi-head latent attention (MLA) layout");
  Edited lora("llama", [](json& c) { c["q_lora_rank"] = 1536; });
  expect_one_line_error(run_hf(lora.model()), "params.q_lora_rank: not a llama setting (deepseek_v3's attention reads it");
  Edited use("llama", [](json& c) { c["use_mla"] = true; });
  expect_one_line_error(run_hf(use.model()), "use_mla");
}

// DeepSeek-V3's widths against its tensors, and its own contradictions.
TEST(HfHostile, MlaFieldsContradictingTheTensors) {
  Edited kl("deepseek_v3", [](json& c) { c["kv_lora_rank"] = 64; });
  expect_one_line_error(run_hf(kl.model()), "tensor 'kv_a_proj_with_mqa.weight': expected shape (96, 64), found (64, 64)");
  Edited v("deepseek_v3", [](json& c) { c["v_head_dim"] = 16; });
  expect_one_line_error(run_hf(v.model()), "expected shape");
  Edited q("deepseek_v3", [](json& c) { c["q_lora_rank"] = nullptr; });  // q_proj, which the folder lacks
  expect_one_line_error(run_hf(q.model()), "q_proj.weight");
  Edited kv("deepseek_v3", [](json& c) { c["num_key_value_heads"] = 2; });
  expect_one_line_error(run_hf(kv.model()), "params.num_key_value_heads: expected num_attention_heads (4");
  Edited hd("deepseek_v3", [](json& c) { c["head_dim"] = 48; });
  expect_one_line_error(run_hf(hd.model()), "params.head_dim: DeepSeek-V3's head_dim is its rotary width");
  Edited odd("deepseek_v3", [](json& c) { c["qk_rope_head_dim"] = 31; });
  expect_one_line_error(run_hf(odd.model()), "params.qk_rope_head_dim: expected an even width");
  Edited huge("deepseek_v3", [](json& c) { c["kv_lora_rank"] = 9223372036854775800LL; });
  expect_one_line_error(run_hf(huge.model()), "kv_lora_rank");
  Edited win("deepseek_v3", [](json& c) { c["sliding_window"] = 4; });
  expect_one_line_error(run_hf(win.model()), "params.sliding_window: not a deepseek_v3 setting");
  // Past num_hidden_layers + num_nextn_predict_layers (2 + 1).
  expect_one_line_error(run_hf(hf_example("deepseek_v3"), "--layer 3"), "layer 3 is out of range");
  Edited mtp("deepseek_v3", [](json& c) { c["num_nextn_predict_layers"] = 2; });  // layer 3's tensors are absent
  expect_one_line_error(run_hf(mtp.model(), "--layer 3"), "no tensor of layer 3's attention");
}

// head_dim x heads against the tensors' shapes: refused from the headers.
TEST(HfHostile, FieldsContradictingTheTensors) {
  Edited e("mistral", [](json& c) { c["head_dim"] = 8; });
  expect_one_line_error(run_hf(e.model()), "expected shape");
  Edited h("mistral", [](json& c) { c["num_key_value_heads"] = 4; });
  expect_one_line_error(run_hf(h.model()), "k_proj.weight");
}

TEST(HfHostile, HugeDimensions) {
  Edited overflow("llama", [](json& c) {
    c["num_attention_heads"] = 4294967296LL;
    c["num_key_value_heads"] = 4294967296LL;
    c["head_dim"] = 4294967296LL;
  });
  expect_one_line_error(run_hf(overflow.model()), "overflows");
  Edited big("llama", [](json& c) {
    c["hidden_size"] = 1LL << 40;
    c["head_dim"] = 16;
  });
  // Refused before anything that size is allocated (from the sizes, or the header).
  expect_one_line_error(run_hf(big.model()), "q_proj.weight");
  Edited layers("llama", [](json& c) { c["num_hidden_layers"] = 1000000000; });
  expect_one_line_error(run_mha("inspect " + shell_quote(layers.model())), "num_hidden_layers");
}

TEST(HfHostile, LayerOutOfRange) {
  expect_one_line_error(run_hf(hf_example("llama"), "--layer 2"), "layer 2 is out of range");
  TempDir d;
  write_text(d.file("c.json"), R"({"model": {"hf": ")" + hf_example("llama") + R"(", "layer": 7}})");
  expect_one_line_error(run_mha("run --config " + shell_quote(d.file("c.json"))), "out of range");
}

// A layer index past the tensors (num_hidden_layers larger than the checkpoint).
TEST(HfHostile, MissingTensors) {
  Edited more("llama", [](json& c) { c["num_hidden_layers"] = 3; });
  expect_one_line_error(run_hf(more.model(), "--layer 2"), "no tensor of layer 2");
  // One weight of the layer missing: the loader names it.
  TempDir d;
  fs::copy(hf_example("llama"), d.file("m"), fs::copy_options::recursive);
  NamedTensors kept;
  for (auto& nt : io::read_safetensors(d.file("m/model.safetensors")))
    if (nt.first != "model.layers.0.self_attn.k_proj.weight") kept.push_back(nt);
  fs::remove(d.file("m/model.safetensors"));
  io::write_safetensors(d.file("m/model.safetensors"), kept);
  expect_one_line_error(run_hf(d.file("m")), "k_proj.weight");
  fs::remove(d.file("m/model.safetensors"));
  expect_one_line_error(run_hf(d.file("m")), "no model.safetensors");
}

// A shard named outside the folder is never opened.
TEST(HfHostile, ShardOutsideTheFolder) {
  TempDir d;
  fs::copy(hf_example("qwen3_sharded"), d.file("m"), fs::copy_options::recursive);
  json index = json::parse(read_text(d.file("m/model.safetensors.index.json")));
  for (auto& v : index["weight_map"]) v = "../outside.safetensors";
  fs::remove(d.file("m/model.safetensors.index.json"));
  write_text(d.file("m/model.safetensors.index.json"), index.dump());
  expect_one_line_error(run_hf(d.file("m")), "outside.safetensors");
}

// Attention fields mha does not run are named, never ignored.
TEST(HfHostile, UnsupportedAttentionFields) {
  Edited dyn("llama", [](json& c) { c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}}; });
  expect_one_line_error(run_hf(dyn.model()), "rope_scaling.rope_type: \"dynamic\" is not supported");
  Edited both("llama", [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"type", "yarn"}, {"factor", 2.0}}; });
  expect_one_line_error(run_hf(both.model()), "contradicts");
  Edited extra("llama", [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"mscale", 1.0}}; });
  expect_one_line_error(run_hf(extra.model()), "rope_scaling.mscale");
  Edited chunk("gpt_oss", [](json& c) { c["layer_types"] = {"chunked_attention", "full_attention"}; });
  expect_one_line_error(run_hf(chunk.model()), "layer_types[0]");
  Edited cap("llama", [](json& c) { c["attn_logit_softcapping"] = 30.0; });
  expect_one_line_error(run_hf(cap.model()), "attn_logit_softcapping: not a llama setting");
  Edited partial("llama", [](json& c) { c["partial_rotary_factor"] = 0.5; });
  expect_one_line_error(run_hf(partial.model()), "partial_rotary_factor");
  // Phi-3 reads the factor; one far out of range is refused before its
  // width is computed (the width's cast would overflow: the fuzzers' find).
  Edited huge("phi3", [](json& c) { c["partial_rotary_factor"] = 5.5e103; });
  expect_one_line_error(run_hf(huge.model()), "expected a factor in (0, 1]");
  Edited chunked("llama", [](json& c) { c["attention_chunk_size"] = 8192; });
  expect_one_line_error(run_hf(chunked.model()), "attention_chunk_size");
  Edited types("gemma2", [](json& c) { c["layer_types"] = {"full_attention"}; });
  expect_one_line_error(run_hf(types.model()), "layer_types");
}

TEST(HfHostile, NotAModelFolder) {
  TempDir d;
  expect_one_line_error(run_hf(d.file("none")), "found no folder");
  fs::create_directory(d.file("empty"));
  expect_one_line_error(run_hf(d.file("empty")), "config.json: missing");
  write_text(d.file("empty/config.json"), "{\"model_type\": ");
  expect_one_line_error(run_hf(d.file("empty")), "invalid JSON");
  expect_one_line_error(run_mha("run -n 0"), "--config FILE or --hf DIR");
}

}  // namespace
}  // namespace mha::test
