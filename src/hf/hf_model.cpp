#include "hf/hf_model.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace fs = std::filesystem;

namespace {

// Real config.json files are a few KB (LongRoPE's factor lists included);
// a larger one is not a model's config and is refused before it is read.
constexpr std::uintmax_t kMaxConfigBytes = 16u << 20;
// Today's largest models have about a hundred layers.
constexpr int64_t kMaxLayers = 1 << 16;

// Keys that change attention in models mha does not run. Refused when set
// (not null), naming the key, rather than run as something else. (MLA's
// keys in a family without MLA are refused by the family's key check.)
const char* const kRefusedKeys[][2] = {
    {"attention_chunk_size", "chunked attention is not supported"},
    {"no_rope_layers", "layers without a rotary embedding are not supported"},
    {"use_qk_norm", "Llama 4's QK L2-norm is not supported"},
    {"attn_temperature_tuning", "attention temperature tuning is not supported"},
    {"rope_parameters", "transformers 5's rope_parameters are not read yet; write rope_theta / rope_scaling"},
    {"use_mla", "MLA switched on in another family's layout is not supported (mha runs deepseek_v3's)"},
};

// MLA models other than DeepSeek-V3's layout (deepseek_v3, kimi_k2).
const std::set<std::string>& mla_model_types() {
  static const std::set<std::string> t = {"deepseek_v2", "kimi_vl", "deepseek_vl_v2"};
  return t;
}
const char* const kOtherMla = ": this multi-head latent attention (MLA) layout is not supported (mha runs deepseek_v3's and kimi_k2's)";

// "LlamaForCausalLM" -> "llama", for a config without model_type.
std::string model_type_from_architectures(const ordered_json& cfg) {
  const ordered_json* a = find(cfg, "architectures");
  if (!a || !a->is_array() || a->empty() || !(*a)[0].is_string()) return "";
  const std::string arch = (*a)[0].get<std::string>();
  static const std::pair<const char*, const char*> known[] = {
      {"Llama", "llama"}, {"Mistral", "mistral"}, {"Qwen2", "qwen2"}, {"Qwen3", "qwen3"}, {"Gemma2", "gemma2"},
      {"Gemma3", "gemma3"}, {"GptOss", "gpt_oss"}, {"Phi3", "phi3"}, {"DeepseekV3", "deepseek_v3"}};
  for (const auto& k : known)
    if (arch.rfind(k.first, 0) == 0 && arch.find("Moe") == std::string::npos) return k.second;
  return "";
}

std::string weights_file(const std::string& dir) {
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") found.push_back(e.path().string());
  if (found.size() == 1) return found[0];
  throw InputError(printable(dir, 400) + ": no model.safetensors or model.safetensors.index.json" +
                   (found.empty() ? std::string(" (and no .safetensors file)")
                                  : " (and " + std::to_string(found.size()) + " .safetensors files without an index)"));
}

// The text model's config and model_type: the config itself, or its
// text_config (Gemma 3's multimodal folders), whose model_type may be omitted.
std::pair<ordered_json, std::string> text_config(const ordered_json& cfg, const std::string& where) {
  const ordered_json* mt = find(cfg, "model_type");
  std::string top = mt && mt->is_string() ? mt->get<std::string>() : model_type_from_architectures(cfg);
  if (mt && !mt->is_string()) throw InputError(where + ": model_type: expected a string, found " + json_brief(*mt));
  if (mla_model_types().count(top))
    throw InputError(where + ": model_type \"" + top + "\"" + kOtherMla);
  const ordered_json* tc = find(cfg, "text_config");
  if (!tc || tc->is_null()) return {cfg, top};
  if (!tc->is_object()) throw InputError(where + ": text_config: expected an object, found " + json_brief(*tc));
  const ordered_json* tmt = find(*tc, "model_type");
  if (tmt && !tmt->is_string()) throw InputError(where + ": text_config.model_type: expected a string, found " + json_brief(*tmt));
  std::string inner = tmt ? tmt->get<std::string>() : top == "gemma3" ? "gemma3_text" : "";
  if (inner.empty()) throw InputError(where + ": text_config.model_type: missing (the text model's family)");
  return {*tc, inner};
}

}  // namespace

HfModel open_hf_model(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw InputError(printable(dir, 400) + ": expected a Hugging Face model folder (config.json and safetensors), "
                     "found no folder");
  HfModel m;
  m.dir = dir;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const std::string where = printable(cfg_path, 400);
  if (!fs::exists(cfg_path)) throw InputError(where + ": missing (expected a Hugging Face model folder)");
  if (fs::is_regular_file(cfg_path) && fs::file_size(cfg_path) > kMaxConfigBytes)
    throw InputError(where + ": " + std::to_string(fs::file_size(cfg_path)) + " bytes, more than a model config's " +
                     std::to_string(kMaxConfigBytes) + " at most");
  const ordered_json cfg = read_json_file(cfg_path, "config.json");
  if (!cfg.is_object()) throw InputError(where + ": expected a JSON object, found " + json_brief(cfg));
  auto [text, type] = text_config(cfg, where);
  const std::string tpath = &text == &cfg ? "" : "text_config.";
  if (mla_model_types().count(type))
    throw InputError(where + ": model_type \"" + type + "\"" + kOtherMla);
  const auto family = hf_family_from_model_type(type);
  if (!family)
    throw InputError(where + ": " + tpath + "model_type " + (type.empty() ? std::string("missing") : "\"" + printable(type) + "\"") +
                     " is not supported (mha runs llama, mistral, qwen2, qwen3, gemma2, gemma3, gpt_oss, phi3, deepseek_v3, mixtral, "
                     "qwen2_moe, qwen3_moe, kimi_k2)");
  m.family = *family;
  m.model_type = type;
  for (const auto& r : kRefusedKeys)
    if (const ordered_json* v = find(text, r[0]); v && !v->is_null() && !(v->is_boolean() && !v->get<bool>()))
      throw InputError(where + ": " + tpath + r[0] + " " + json_brief(*v) + ": " + r[1]);
  const ordered_json* n = find(text, "num_hidden_layers");
  if (!n) throw InputError(where + ": " + tpath + "num_hidden_layers: missing");
  m.num_layers = as_int(*n, tpath + "num_hidden_layers", 1);
  if (m.num_layers > kMaxLayers)  // inspect walks every layer: bounded
    throw InputError(where + ": " + tpath + "num_hidden_layers: expected at most " + std::to_string(kMaxLayers) +
                     ", found " + std::to_string(m.num_layers));
  if (m.family == HfFamily::DeepseekV3)
    if (const ordered_json* mtp = find(text, "num_nextn_predict_layers"); mtp && !mtp->is_null()) {
      m.mtp_layers = as_int(*mtp, tpath + "num_nextn_predict_layers", 0);
      if (m.mtp_layers > kMaxLayers)
        throw InputError(where + ": " + tpath + "num_nextn_predict_layers: expected at most " +
                         std::to_string(kMaxLayers) + ", found " + std::to_string(m.mtp_layers));
    }
  const std::vector<std::string>& keys = hf_attention_keys();
  for (auto it = text.begin(); it != text.end(); ++it) {
    if (std::find(keys.begin(), keys.end(), it.key()) != keys.end()) m.attention_params[it.key()] = *it;
    else m.unread_keys.push_back(it.key());
  }
  m.attention_params["model_type"] = type == "gemma3" ? "gemma3_text" : type;
  m.weights = weights_file(dir);
  return m;
}

ordered_json hf_layer_params(const HfModel& m, int64_t layer) {
  if (layer < 0 || layer >= m.num_layers + m.mtp_layers)
    throw InputError(printable(m.dir, 400) + ": layer " + std::to_string(layer) + " is out of range (num_hidden_layers " +
                     std::to_string(m.num_layers) +
                     (m.mtp_layers ? " + num_nextn_predict_layers " + std::to_string(m.mtp_layers) : std::string()) +
                     ": layers 0.." + std::to_string(m.num_layers + m.mtp_layers - 1) + ")");
  ordered_json p = m.attention_params;
  p["layer_idx"] = layer;
  return p;
}

std::string hf_layer_prefix(const HfModel& m, const std::vector<std::string>& names, int64_t layer) {
  const std::string needle = "layers." + std::to_string(layer) + ".self_attn.";
  std::set<std::string> stems;
  for (const std::string& name : names) {
    const std::size_t at = name.find(needle);
    if (at == std::string::npos || (at > 0 && name[at - 1] != '.')) continue;
    const std::string stem = name.substr(0, at);
    // A multimodal model's vision (or audio) tower has layers of its own.
    if (stem.find("vision") != std::string::npos || stem.find("visual") != std::string::npos ||
        stem.find("audio") != std::string::npos)
      continue;
    stems.insert(stem);
  }
  if (stems.empty())
    throw InputError(printable(m.weights, 400) + ": no tensor of layer " + std::to_string(layer) +
                     "'s attention (expected names like model.layers." + std::to_string(layer) + ".self_attn.q_proj.weight)");
  if (stems.size() > 1)
    throw InputError(printable(m.weights, 400) + ": layer " + std::to_string(layer) + "'s attention is under " +
                     std::to_string(stems.size()) + " prefixes ('" + printable(*stems.begin(), 120) + needle + "', '" +
                     printable(*std::next(stems.begin()), 120) + needle + "'); pick one with weights.prefix");
  return *stems.begin() + needle;
}

}  // namespace mha
