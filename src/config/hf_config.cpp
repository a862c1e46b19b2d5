#include "config/hf_config.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace fs = std::filesystem;

void resolve_hf_model(RunConfig& c) {
  const HfModel m = open_hf_model(c.model->hf);
  if (!m.unread_keys.empty()) {
    std::string keys;
    for (const std::string& k : m.unread_keys) keys += (keys.empty() ? "" : ", ") + printable(k, 60);
    spdlog::info("{}/config.json: keys outside attention, not read: {}", m.dir, keys);
  }
  c.params = hf_layer_params(m, c.model->layer);
  const HfLayerAttention a = parse_hf_attention(c.params);  // refused here, naming the field, before any tensor
  c.variant = hf_variant_name(a);
  c.weights = hf_layer_weights(m, c.model->layer);
  if (c.inputs.empty()) {
    InputConfig x;
    x.name = "x";
    x.kind = InputConfig::Kind::Randn;
    x.shape = {1, c.decode ? c.decode->prompt + c.decode->tokens : kDefaultHfSeq, a.hidden};
    c.inputs.push_back(x);
  }
}

WeightsConfig hf_layer_weights(const HfModel& m, int64_t layer) {
  const io::Checkpoint ck(m.weights);  // names only: an index, or one file's header
  WeightsConfig w;
  w.kind = WeightsConfig::Kind::File;
  w.path = m.weights;
  w.prefix = hf_layer_prefix(m, ck.names(), layer);
  return w;
}

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

std::string format_hf_inspect(const std::string& dir, bool json) {
  const HfModel m = open_hf_model(dir);
  const io::Checkpoint ck(m.weights);
  nlohmann::ordered_json j = {{"folder", dir}, {"model_type", m.model_type}, {"family", hf_family_name(m.family)},
                              {"weights", m.weights}, {"num_hidden_layers", m.num_layers},
                              {"num_nextn_predict_layers", m.mtp_layers}};
  std::string text = dir + ": " + m.model_type + " (family " + hf_family_name(m.family) + "), " +
                     std::to_string(m.num_layers) + " layers" +
                     (m.mtp_layers ? " + " + std::to_string(m.mtp_layers) + " multi-token prediction" : std::string()) +
                     ", weights " + m.weights + "\n";
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < m.num_layers + m.mtp_layers; ++i) {
    const HfLayerAttention a = parse_hf_attention(hf_layer_params(m, i));
    const std::string prefix = hf_layer_prefix(m, ck.names(), i);
    const bool mtp = i >= m.num_layers;  // DeepSeek-V3's multi-token prediction
    const std::string what = describe_hf_attention(a) + (mtp ? " (multi-token prediction)" : "");
    char head[160];
    std::snprintf(head, sizeof head, "layer %3lld  hidden %lld, heads %lld, kv heads %lld, head_dim %lld: ",
                  static_cast<long long>(i), static_cast<long long>(a.hidden), static_cast<long long>(a.heads),
                  static_cast<long long>(a.kv_heads), static_cast<long long>(a.head_dim));
    text += head + what + "  [" + prefix + "]\n";
    layers.push_back({{"layer", i},
                      {"prefix", prefix},
                      {"type", a.sliding ? "sliding" : "full"},
                      {"window", a.window},
                      {"hidden", a.hidden},
                      {"heads", a.heads},
                      {"kv_heads", a.kv_heads},
                      {"head_dim", a.head_dim},
                      {"rope_theta", a.rope.theta},
                      {"rope_scaling", rope_scaling_name(a.rope.scaling)},
                      {"rope_factor", a.rope.factor},
                      {"rope_attention_factor", a.rope.attention_factor},
                      {"rotary_dim", a.rope.rotary_dim > 0 ? a.rope.rotary_dim : a.head_dim},
                      {"qk_norm", a.qk_norm ? (a.qk_norm_offset_one ? "1+w" : "w") : "none"},
                      {"softcap", a.softcap},
                      {"scale", a.scale},
                      {"sinks", a.sinks},
                      {"variant", hf_variant_name(a)},
                      {"multi_token_prediction", mtp},
                      {"summary", what}});
    if (a.mla)
      layers.back()["mla"] = {{"q_lora_rank", a.mla->q_lora_rank}, {"kv_lora_rank", a.mla->kv_lora_rank},
                              {"qk_nope_head_dim", a.mla->nope_dim}, {"qk_rope_head_dim", a.mla->rope_dim},
                              {"v_head_dim", a.mla->v_dim}, {"rope_interleave", a.rope.interleaved}};
  }
  j["layers"] = layers;
  return json ? j.dump(2) + "\n" : text;
}

}  // namespace mha
