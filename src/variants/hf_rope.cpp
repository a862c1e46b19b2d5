// The rotary embedding of one Hugging Face layer: rope_theta (Gemma 3's
// rope_local_base_freq on sliding layers), partial_rotary_factor, and
// rope_scaling spelled with "rope_type" or "type", as transformers'
// modeling_rope_utils.py (main, 2025) computes its parameters.
#include <cmath>

#include "util/error.h"
#include "util/text.h"
#include "variants/common.h"
#include "variants/hf_families.h"

namespace mha {

namespace {

double number_at_least(const ordered_json& o, const char* key, double min, std::optional<double> dflt) {
  const std::string path = std::string("params.rope_scaling.") + key;
  const ordered_json* v = given(o, key);
  if (!v) {
    if (!dflt) throw InputError(path + ": required by this rope_type, missing");
    return *dflt;
  }
  const double x = as_number(*v, path);
  if (!(x >= min) || !std::isfinite(x))
    throw InputError(path + ": expected a finite number of at least " + std::to_string(min) + ", found " + json_brief(*v));
  return x;
}

// YaRN's attention scaling: 0.1 * mscale * ln(factor) + 1, 1 for factor <= 1.
double yarn_mscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

void parse_yarn(const ordered_json& s, int64_t max_positions, RotaryEmbedding& r) {
  check_keys(s, "params.rope_scaling", {"rope_type", "type", "factor", "attention_factor", "beta_fast", "beta_slow",
                                        "mscale", "mscale_all_dim", "original_max_position_embeddings", "truncate"});
  r.scaling = RopeScaling::Yarn;
  r.factor = number_at_least(s, "factor", 1.0, std::nullopt);
  // `or 32` / `or 1` in transformers: a zero takes the default too.
  r.beta_fast = number_at_least(s, "beta_fast", 0.0, 32.0);
  r.beta_slow = number_at_least(s, "beta_slow", 0.0, 1.0);
  if (r.beta_fast == 0.0) r.beta_fast = 32.0;
  if (r.beta_slow == 0.0) r.beta_slow = 1.0;
  const ordered_json* o = given(s, "original_max_position_embeddings");
  r.original_max_positions = o && as_int(*o, "params.rope_scaling.original_max_position_embeddings", 0) > 0
                                 ? as_int(*o, "params.rope_scaling.original_max_position_embeddings", 1)
                                 : max_positions;
  if (const ordered_json* t = given(s, "truncate")) r.truncate = as_bool(*t, "params.rope_scaling.truncate");
  if (given(s, "attention_factor")) {
    r.attention_factor = number_at_least(s, "attention_factor", 0.0, std::nullopt);
  } else {
    const double m = number_at_least(s, "mscale", 0.0, 0.0), all = number_at_least(s, "mscale_all_dim", 0.0, 0.0);
    r.attention_factor = m != 0.0 && all != 0.0 ? yarn_mscale(r.factor, m) / yarn_mscale(r.factor, all)
                                                : yarn_mscale(r.factor, 1.0);
  }
}

void parse_scaling(const ordered_json& s, int64_t max_positions, RotaryEmbedding& r) {
  if (!s.is_object()) throw InputError("params.rope_scaling: expected an object or null, found " + json_brief(s));
  const ordered_json* rt = given(s, "rope_type");
  const ordered_json* t = given(s, "type");
  if (rt && t && *rt != *t)
    throw InputError("params.rope_scaling: rope_type " + json_brief(*rt) + " contradicts type " + json_brief(*t));
  if (!rt && !t) throw InputError("params.rope_scaling.rope_type: missing (nor \"type\")");
  const std::string type = as_string(rt ? *rt : *t, rt ? "params.rope_scaling.rope_type" : "params.rope_scaling.type");
  if (type == "default") {
    check_keys(s, "params.rope_scaling", {"rope_type", "type"});
  } else if (type == "linear") {
    check_keys(s, "params.rope_scaling", {"rope_type", "type", "factor"});
    r.scaling = RopeScaling::Linear;
    r.factor = number_at_least(s, "factor", 1e-30, std::nullopt);
  } else if (type == "llama3") {
    check_keys(s, "params.rope_scaling", {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                          "original_max_position_embeddings"});
    r.scaling = RopeScaling::Llama3;
    r.factor = number_at_least(s, "factor", 1e-30, std::nullopt);
    r.low_freq_factor = number_at_least(s, "low_freq_factor", 1e-30, std::nullopt);
    r.high_freq_factor = number_at_least(s, "high_freq_factor", 1e-30, std::nullopt);
    if (!(r.high_freq_factor > r.low_freq_factor))
      throw InputError("params.rope_scaling.high_freq_factor: expected more than low_freq_factor (" +
                       std::to_string(r.low_freq_factor) + "), found " + std::to_string(r.high_freq_factor));
    r.original_max_positions = number_at_least(s, "original_max_position_embeddings", 1, std::nullopt);
  } else if (type == "yarn") {
    parse_yarn(s, max_positions, r);
  } else {
    throw InputError("params.rope_scaling.rope_type: \"" + printable(type) +
                     "\" is not supported (mha runs default, linear, llama3 and yarn)");
  }
}

}  // namespace

RotaryEmbedding parse_hf_rope(const ordered_json& p, HfFamily f, const HfLayerAttention& a) {
  RotaryEmbedding r;
  auto positive = [&](const char* key, double dflt) { return positive_number(p, key, dflt); };
  const double theta_default = f == HfFamily::Gemma3 ? 1e6 : f == HfFamily::GptOss ? 150000.0 : 10000.0;
  // Gemma 3's sliding layers: their own base, and no scaling (its local
  // rotary embedding is built with rope_type "default").
  const bool local = f == HfFamily::Gemma3 && a.sliding;
  r.theta = local ? positive("rope_local_base_freq", 10000.0) : positive("rope_theta", theta_default);
  if (f == HfFamily::Gemma3) positive("rope_local_base_freq", 10000.0);  // checked on every layer
  if (const ordered_json* prf = given(p, "partial_rotary_factor")) {
    const double x = as_number(*prf, "params.partial_rotary_factor");
    if (x != 1.0 && f != HfFamily::Phi3)
      throw InputError("params.partial_rotary_factor: " + std::string(hf_family_name(f)) +
                       "'s attention rotates the whole head (Phi-3's reads it), found " + json_brief(*prf));
    // The width only for a factor in range: a huge one would overflow the cast.
    const bool in_range = x > 0.0 && x <= 1.0;
    const int64_t dim = in_range ? static_cast<int64_t>(static_cast<double>(a.head_dim) * x) : 0;
    if (!in_range || dim < 2 || dim % 2 != 0)
      throw InputError("params.partial_rotary_factor: expected a factor in (0, 1] giving an even rotated width of "
                       "head_dim (" + std::to_string(a.head_dim) + "), found " + json_brief(*prf));
    r.rotary_dim = dim == a.head_dim ? 0 : dim;
  }
  const int64_t max_positions = param_int(p, {"max_position_embeddings"}, f == HfFamily::Gemma3 || f == HfFamily::GptOss
                                                                              ? 131072
                                                                          : f == HfFamily::DeepseekV3 ? 4096 : 2048);
  const ordered_json* s = find(p, "rope_scaling");
  if (!s && f == HfFamily::GptOss) {  // GptOssConfig's default rope_scaling
    static const ordered_json dflt = ordered_json::parse(
        R"({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
            "original_max_position_embeddings": 4096})");
    parse_scaling(dflt, max_positions, r);
  } else if (s && !s->is_null()) {
    RotaryEmbedding scaled = r;
    parse_scaling(*s, max_positions, scaled);  // checked on every layer, used on global ones
    if (!local) r = scaled;
  }
  return r;
}

}  // namespace mha
