#include "variants/hf_families.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/checked_size.h"
#include "util/error.h"
#include "util/text.h"
#include "variants/common.h"

namespace mha {

const ordered_json* given(const ordered_json& p, const char* key) {
  const ordered_json* v = find(p, key);
  return v && !v->is_null() ? v : nullptr;
}

double positive_number(const ordered_json& p, const char* key, double dflt) {
  const ordered_json* v = given(p, key);
  const double x = v ? as_number(*v, std::string("params.") + key) : dflt;
  if (!(x > 0.0) || !std::isfinite(static_cast<float>(x)))
    throw InputError(std::string("params.") + key + ": expected a positive float32 number, found " +
                     (v ? json_brief(*v) : std::to_string(x)));
  return x;
}

namespace {

using F = HfFamily;

struct FamilyInfo {
  F family;
  const char* name;
  // Keys of this family beyond the common ones.
  std::vector<const char*> keys;
};

// The keys every family reads. qkv_bias / o_proj_bias are mha's own
// switches over the family's bias layout (docs/CONFIG.md).
const std::vector<const char*> kCommonKeys = {
    "model_type", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta",
    "rope_scaling", "max_position_embeddings", "rms_norm_eps", "layer_idx", "num_hidden_layers", "qkv_bias",
    "o_proj_bias", "partial_rotary_factor"};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> f = {
      // Llama keeps the window switches mha always took for it (a Mistral-style window).
      {F::Llama, "llama", {"attention_bias", "sliding_window", "use_sliding_window"}},
      {F::Mistral, "mistral", {"attention_bias", "sliding_window", "use_sliding_window"}},
      {F::Qwen2, "qwen2", {"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"}},
      {F::Qwen3, "qwen3", {"attention_bias", "sliding_window", "use_sliding_window", "max_window_layers", "layer_types"}},
      {F::Gemma2, "gemma2",
       {"attention_bias", "sliding_window", "layer_types", "query_pre_attn_scalar", "attn_logit_softcapping"}},
      {F::Gemma3, "gemma3_text",
       {"attention_bias", "sliding_window", "layer_types", "query_pre_attn_scalar", "attn_logit_softcapping",
        "rope_local_base_freq", "sliding_window_pattern", "_sliding_window_pattern"}},
      {F::GptOss, "gpt_oss", {"attention_bias", "sliding_window", "layer_types"}},
      // original_max_position_embeddings serves LongRoPE only, which is refused.
      {F::Phi3, "phi3", {"attention_bias", "sliding_window", "original_max_position_embeddings"}},
      {F::DeepseekV3, "deepseek_v3",
       {"attention_bias", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "rope_interleave", "num_nextn_predict_layers"}},
  };
  return f;
}

const FamilyInfo& info(F f) {
  for (const FamilyInfo& i : families())
    if (i.family == f) return i;
  throw std::logic_error("unknown family");
}

bool has_key(const std::vector<const char*>& keys, const std::string& k) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* n) { return k == n; });
}

// A key of another family is refused by name (its module would not read
// it); a key of none is refused with the family's list.
void check_family_keys(const ordered_json& p, F f) {
  const FamilyInfo& mine = info(f);
  for (auto it = p.begin(); it != p.end(); ++it) {
    const std::string& k = it.key();
    if (has_key(kCommonKeys, k) || has_key(mine.keys, k)) continue;
    if (it->is_null()) continue;  // null: not set, as Hugging Face's configs write an absent option
    for (const FamilyInfo& other : families())
      if (has_key(other.keys, k))
        throw InputError("params." + k + ": not a " + mine.name + " setting (" + other.name +
                         "'s attention reads it; " + mine.name + "'s does not)");
    std::string list;
    for (const char* n : kCommonKeys) list += std::string(list.empty() ? "" : ", ") + n;
    for (const char* n : mine.keys) list += std::string(", ") + n;
    throw InputError("params." + printable(k) + ": unknown parameter of " + mine.name + " (expected: " + list + ")");
  }
}

F parse_family(const ordered_json& p) {
  const ordered_json* t = find(p, "model_type");
  if (!t) return F::Llama;
  const std::string v = t->is_string() ? t->get<std::string>() : "";
  if (auto f = hf_family_from_model_type(v)) return *f;
  throw InputError("params.model_type: expected one of llama, mistral, qwen2, qwen3, gemma2, gemma3_text, gpt_oss, "
                   "phi3, deepseek_v3 (or mixtral, qwen2_moe, qwen3_moe, kimi_k2), found " + printable(t->dump()));
}

// The config classes' defaults for fields a config may omit (Gemma 3's
// multimodal text_config omits every field at its default).
struct Defaults {
  std::optional<int64_t> hidden, heads, kv_heads, head_dim;
  double theta = 10000.0;
  int64_t max_positions = 2048;
  int64_t window = 4096;
};

Defaults defaults(F f) {
  Defaults d;
  switch (f) {
    case F::Gemma2: d.head_dim = 256; break;
    case F::Gemma3: d.hidden = 2304, d.heads = 8, d.kv_heads = 4, d.head_dim = 256, d.theta = 1e6, d.max_positions = 131072; break;
    case F::GptOss: d.hidden = 2880, d.heads = 64, d.kv_heads = 8, d.head_dim = 64, d.theta = 150000.0, d.max_positions = 131072, d.window = 128; break;
    default: break;
  }
  return d;
}

void parse_shape(const ordered_json& p, F f, HfLayerAttention& a) {
  const Defaults d = defaults(f);
  a.hidden = param_int(p, {"hidden_size"}, d.hidden);
  a.heads = param_int(p, {"num_attention_heads"}, d.heads);
  const ordered_json* kv = given(p, "num_key_value_heads");
  a.kv_heads = kv ? as_int(*kv, "params.num_key_value_heads", 1) : d.kv_heads.value_or(a.heads);
  if (a.heads % a.kv_heads != 0)
    throw InputError("params.num_attention_heads: expected a multiple of params.num_key_value_heads (" +
                     std::to_string(a.kv_heads) + "), found " + std::to_string(a.heads));
  // Absent or null: the family's default, else hidden_size / heads, as the modules take it.
  const ordered_json* hd = given(p, "head_dim");
  if (!hd && !d.head_dim) check_divisible(a.hidden, "hidden_size", a.heads, "num_attention_heads");
  a.head_dim = hd ? as_int(*hd, "params.head_dim", 1) : d.head_dim.value_or(a.hidden / a.heads);
  if (a.head_dim % 2 != 0)
    throw InputError("params.head_dim: expected an even width (the rotary embedding rotates pairs), found " +
                     std::to_string(a.head_dim));
  // Refused here when they overflow, before weight_slots or a backend multiplies them again.
  a.q_width = checked_mul(a.heads, a.head_dim, field("params.num_attention_heads", a.heads) + " x " +
                                                   field("params.head_dim", a.head_dim));
  a.kv_width = checked_mul(a.kv_heads, a.head_dim, field("params.num_key_value_heads", a.kv_heads) + " x " +
                                                       field("params.head_dim", a.head_dim));
  if (f == F::Phi3)  // qkv_proj's rows
    checked_add(a.q_width, checked_mul(2, a.kv_width, "params: qkv_proj's width"), "params: qkv_proj's width");
}

void parse_biases(const ordered_json& p, F f, HfLayerAttention& a) {
  // Qwen2 hard-codes q/k/v biased and o_proj not; gpt-oss defaults
  // attention_bias to true; Phi-3 has no biases; the rest follow attention_bias.
  bool all = f == F::GptOss;
  if (const ordered_json* b = given(p, "attention_bias")) all = as_bool(*b, "params.attention_bias");
  if (f == F::Phi3 && all)  // some Phi-3 configs write attention_bias false; true would be ignored by the module
    throw InputError("params.attention_bias: Phi-3's qkv_proj and o_proj have no bias (use qkv_bias / o_proj_bias)");
  a.qkv_bias = param_bool(p, {"qkv_bias"}, f == F::Qwen2 ? true : all);
  a.o_bias = param_bool(p, {"o_proj_bias"}, f == F::Qwen2 ? false : all);
}

std::string layer_types_entry(const ordered_json& types, int64_t layer) {
  if (!types.is_array())
    throw InputError("params.layer_types: expected an array of \"sliding_attention\" / \"full_attention\", found " +
                     json_brief(types));
  if (layer >= static_cast<int64_t>(types.size()))
    throw InputError("params.layer_idx: layer " + std::to_string(layer) + " is past params.layer_types, which lists " +
                     std::to_string(types.size()) + " layers");
  const std::string path = "params.layer_types[" + std::to_string(layer) + "]";
  const std::string t = as_string(types[static_cast<std::size_t>(layer)], path);
  if (t != "sliding_attention" && t != "full_attention")
    throw InputError(path + ": expected \"sliding_attention\" or \"full_attention\", found " + printable("\"" + t + "\"") +
                     " (mha runs no other attention type)");
  return t;
}

// Whether the layer is a sliding one: layer_types when given, else the
// family's own rule (as its config class fills layer_types).
bool layer_is_sliding(const ordered_json& p, F f, const HfLayerAttention& a) {
  if (const ordered_json* t = given(p, "layer_types"); t && a.layer_given)
    return layer_types_entry(*t, a.layer) == "sliding_attention";
  switch (f) {
    case F::Gemma2:
    case F::GptOss: return (a.layer + 1) % 2 != 0;
    case F::Gemma3: {
      const ordered_json* old = given(p, "_sliding_window_pattern");
      const int64_t pattern = old ? as_int(*old, "params._sliding_window_pattern", 1)
                                  : param_int(p, {"sliding_window_pattern"}, 6);
      return (a.layer + 1) % pattern != 0;
    }
    case F::Qwen2:
    case F::Qwen3: {
      if (!param_bool(p, {"use_sliding_window"}, false) || !given(p, "sliding_window")) return false;
      // Without layer_idx (params written by hand): the window applies, as
      // mha always read Qwen2's; from a folder, only from max_window_layers on.
      return !a.layer_given || a.layer >= param_int(p, {"max_window_layers"}, 28, 0);
    }
    default:  // Llama, Mistral, Phi-3: every layer, when the config has a window
      return param_bool(p, {"use_sliding_window"}, true) && given(p, "sliding_window");
  }
}

void parse_window(const ordered_json& p, F f, HfLayerAttention& a) {
  if (const ordered_json* t = given(p, "layer_types")) {
    const ordered_json* n = given(p, "num_hidden_layers");
    if (n && t->is_array() && static_cast<int64_t>(t->size()) != as_int(*n, "params.num_hidden_layers", 1))
      throw InputError("params.layer_types: lists " + std::to_string(t->size()) + " layers, params.num_hidden_layers " +
                       json_brief(*n));
  }
  a.sliding = layer_is_sliding(p, f, a);
  if (!a.sliding) return;
  const ordered_json* w = find(p, "sliding_window");
  if (w && w->is_null()) {  // a sliding layer with no window: attends to everything, as the modules do
    a.sliding = false;
    return;
  }
  a.window = w ? as_int(*w, "params.sliding_window", 1) : defaults(f).window;
}

}  // namespace

// Defined in hf_rope.cpp: the layer's rotary embedding.
RotaryEmbedding parse_hf_rope(const ordered_json& p, HfFamily f, const HfLayerAttention& a);

const char* hf_family_name(HfFamily f) { return info(f).name; }

std::optional<HfFamily> hf_family_from_model_type(const std::string& t) {
  if (t == "gemma3") return F::Gemma3;
  // Mixture-of-experts siblings whose attention is the dense model's.
  if (t == "mixtral") return F::Mistral;
  if (t == "qwen2_moe") return F::Qwen2;
  if (t == "qwen3_moe") return F::Qwen3;
  if (t == "kimi_k2") return F::DeepseekV3;  // DeepseekV3ForCausalLM's layout
  for (const FamilyInfo& i : families())
    if (t == i.name) return i.family;
  return std::nullopt;
}

const std::vector<std::string>& hf_attention_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k(kCommonKeys.begin(), kCommonKeys.end());
    for (const FamilyInfo& i : families())
      for (const char* n : i.keys)
        if (std::find(k.begin(), k.end(), n) == k.end()) k.push_back(n);
    return k;
  }();
  return keys;
}

HfLayerAttention parse_hf_attention(const ordered_json& p) {
  const F f = parse_family(p);
  if (f == F::Qwen2 && given(p, "attention_bias"))
    throw InputError("params.attention_bias: not a Qwen2 setting (Qwen2 biases q/k/v and not o_proj); "
                     "use qkv_bias / o_proj_bias to depart from that");
  check_family_keys(p, f);
  if (f == F::DeepseekV3) return parse_hf_mla(p);
  HfLayerAttention a;
  a.family = f;
  a.layer_given = given(p, "layer_idx") != nullptr;
  a.layer = param_int(p, {"layer_idx"}, 0, 0);
  if (const ordered_json* n = given(p, "num_hidden_layers")) {
    const int64_t layers = as_int(*n, "params.num_hidden_layers", 1);
    if (a.layer >= layers)
      throw InputError("params.layer_idx: expected a layer below params.num_hidden_layers (" + std::to_string(layers) +
                       "), found " + std::to_string(a.layer));
  }
  parse_shape(p, f, a);
  parse_biases(p, f, a);
  a.fused_qkv = f == F::Phi3;
  a.sinks = f == F::GptOss;
  a.qk_norm = f == F::Qwen3 || f == F::Gemma3;
  a.qk_norm_offset_one = f == F::Gemma3;
  a.rms_norm_eps = positive_number(p, "rms_norm_eps", 1e-6);
  // Gemma scales by query_pre_attn_scalar^-1/2 (not head_dim's).
  const bool gemma = f == F::Gemma2 || f == F::Gemma3;
  const double scalar = gemma ? positive_number(p, "query_pre_attn_scalar", 256.0) : static_cast<double>(a.head_dim);
  a.scale = 1.0 / std::sqrt(scalar);
  if (gemma) {
    const ordered_json* c = find(p, "attn_logit_softcapping");
    if (!c && f == F::Gemma2) a.softcap = 50.0;  // Gemma2Config's default; Gemma 3's is None
    else if (c && !c->is_null()) a.softcap = positive_number(p, "attn_logit_softcapping", 0.0);
  }
  parse_window(p, f, a);
  a.rope = parse_hf_rope(p, f, a);
  return a;
}

const char* hf_variant_name(const HfLayerAttention& a) { return a.mla ? "mla_attention" : "llama_attention"; }

std::string describe_hf_attention(const HfLayerAttention& a) {
  char buf[96];
  std::string s = a.sliding ? "sliding " + std::to_string(a.window) : std::string("full");
  std::snprintf(buf, sizeof buf, ", rope %g", a.rope.theta);
  s += buf;
  s += std::string(" (") + rope_scaling_name(a.rope.scaling);
  if (a.rope.scaling != RopeScaling::None) {
    std::snprintf(buf, sizeof buf, " x%g", a.rope.factor);
    s += buf;
  }
  if (a.rope.attention_factor != 1.0) {
    std::snprintf(buf, sizeof buf, ", mscale %.6g", a.rope.attention_factor);
    s += buf;
  }
  s += ")";
  if (a.rope.rotary_dim != 0 && a.rope.rotary_dim != a.head_dim) s += ", rotary " + std::to_string(a.rope.rotary_dim);
  if (a.qk_norm) s += a.qk_norm_offset_one ? ", qk-norm (1+w)" : ", qk-norm";
  if (a.softcap > 0) {
    std::snprintf(buf, sizeof buf, ", softcap %g", a.softcap);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, ", scale %.6g", a.scale);
  s += buf;
  if (a.sinks) s += ", sinks";
  if (a.qkv_bias || a.o_bias) s += a.qkv_bias && a.o_bias ? ", bias qkvo" : a.qkv_bias ? ", bias qkv" : ", bias o";
  if (a.fused_qkv) s += ", fused qkv_proj";
  if (a.mla) {
    const HfMla& m = *a.mla;
    s += ", MLA q_lora " + (m.q_lora_rank > 0 ? std::to_string(m.q_lora_rank) : std::string("none (q_proj)")) +
         ", kv_lora " + std::to_string(m.kv_lora_rank) + ", qk_nope " + std::to_string(m.nope_dim) + ", qk_rope " +
         std::to_string(m.rope_dim) + ", v " + std::to_string(m.v_dim) + (a.rope.interleaved ? ", interleaved" : "");
  }
  return s;
}

}  // namespace mha
