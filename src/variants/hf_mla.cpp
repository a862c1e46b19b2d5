// DeepSeek-V3's (and Kimi K2's) multi-head latent attention from its config
// keys, as transformers' DeepseekV3Config and DeepseekV3Attention read them
// (models/deepseek_v3/{configuration,modeling}_deepseek_v3.py at 00b676f):
//   q_lora_rank (1536; null: one q_proj), kv_lora_rank (512),
//   qk_nope_head_dim (128), qk_rope_head_dim (64), v_head_dim (128),
//   rope_interleave (true), attention_bias (false: q_a_proj,
//   kv_a_proj_with_mqa and o_proj), hidden_size 7168, 128 heads;
//   the config's head_dim is qk_rope_head_dim (the rotary width);
//   scaling = (qk_nope + qk_rope)^-1/2, times mscale^2 with
//   mscale = 0.1 mscale_all_dim ln(factor) + 1 when rope_scaling gives a
//   non-zero mscale_all_dim (and factor > 1);
//   num_nextn_predict_layers: multi-token-prediction layers stored past
//   num_hidden_layers, with the same attention.
// rms_norm_eps is read and checked but does not change the attention: the
// module builds q_a_layernorm and kv_a_layernorm with RMSNorm's default 1e-6.
#include <cmath>

#include "util/checked_size.h"
#include "util/error.h"
#include "variants/common.h"
#include "variants/hf_families.h"

namespace mha {

// Defined in hf_rope.cpp: the layer's rotary embedding.
RotaryEmbedding parse_hf_rope(const ordered_json& p, HfFamily f, const HfLayerAttention& a);

namespace {

// yarn_get_mscale of the module: 1 for factor <= 1.
double mscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

void parse_widths(const ordered_json& p, HfLayerAttention& a, HfMla& m) {
  a.hidden = param_int(p, {"hidden_size"}, 7168);
  a.heads = param_int(p, {"num_attention_heads"}, 128);
  // The module repeats its keys num_heads / num_key_value_heads times over
  // heads that are already num_heads: only equal counts run.
  if (const ordered_json* kv = given(p, "num_key_value_heads"); kv && as_int(*kv, "params.num_key_value_heads", 1) != a.heads)
    throw InputError("params.num_key_value_heads: expected num_attention_heads (" + std::to_string(a.heads) +
                     ": MLA's keys have one head per query head), found " + json_brief(*kv));
  a.kv_heads = a.heads;
  const ordered_json* q = find(p, "q_lora_rank");
  m.q_lora_rank = q && q->is_null() ? 0 : param_int(p, {"q_lora_rank"}, 1536);
  m.kv_lora_rank = param_int(p, {"kv_lora_rank"}, 512);
  m.nope_dim = param_int(p, {"qk_nope_head_dim"}, 128, 0);
  m.rope_dim = param_int(p, {"qk_rope_head_dim"}, 64);
  m.v_dim = param_int(p, {"v_head_dim"}, 128);
  if (m.rope_dim % 2 != 0)
    throw InputError("params.qk_rope_head_dim: expected an even width (the rotary embedding rotates pairs), found " +
                     std::to_string(m.rope_dim));
  if (const ordered_json* hd = given(p, "head_dim"); hd && as_int(*hd, "params.head_dim", 1) != m.rope_dim)
    throw InputError("params.head_dim: DeepSeek-V3's head_dim is its rotary width qk_rope_head_dim (" +
                     std::to_string(m.rope_dim) + "), found " + json_brief(*hd));
  const std::string what = field("params.num_attention_heads", a.heads) + " x (" +
                           field("params.qk_nope_head_dim", m.nope_dim) + " + " +
                           field("params.qk_rope_head_dim", m.rope_dim) + " / " + field("params.v_head_dim", m.v_dim) + ")";
  a.head_dim = checked_add(m.nope_dim, m.rope_dim, what);
  a.q_width = checked_mul(a.heads, a.head_dim, what);
  a.kv_width = checked_mul(a.heads, checked_add(m.nope_dim, m.v_dim, what), what);
  checked_mul(a.heads, m.v_dim, what);
  checked_add(m.kv_lora_rank, m.rope_dim, field("params.kv_lora_rank", m.kv_lora_rank) + " + " +
                                               field("params.qk_rope_head_dim", m.rope_dim));
}

}  // namespace

HfLayerAttention parse_hf_mla(const ordered_json& p) {
  for (const char* k : {"qkv_bias", "o_proj_bias", "partial_rotary_factor"})
    if (given(p, k))
      throw InputError(std::string("params.") + k + ": not a deepseek_v3 setting (its MLA biases follow attention_bias "
                       "and rotates qk_rope_head_dim)");
  HfLayerAttention a;
  HfMla m;
  a.family = HfFamily::DeepseekV3;
  a.layer_given = given(p, "layer_idx") != nullptr;
  a.layer = param_int(p, {"layer_idx"}, 0, 0);
  const int64_t layers = param_int(p, {"num_hidden_layers"}, 61);
  m.mtp_layers = param_int(p, {"num_nextn_predict_layers"}, 0, 0);
  if (a.layer >= checked_add(layers, m.mtp_layers, "params.num_hidden_layers + num_nextn_predict_layers"))
    throw InputError("params.layer_idx: expected a layer below params.num_hidden_layers (" + std::to_string(layers) +
                     ") + num_nextn_predict_layers (" + std::to_string(m.mtp_layers) + "), found " +
                     std::to_string(a.layer));
  parse_widths(p, a, m);
  a.qkv_bias = a.o_bias = param_bool(p, {"attention_bias"}, false);
  a.rms_norm_eps = positive_number(p, "rms_norm_eps", 1e-6);  // checked; the module's norms use 1e-6
  a.rope = parse_hf_rope(p, a.family, a);
  a.rope.rotary_dim = m.rope_dim;
  a.rope.interleaved = param_bool(p, {"rope_interleave"}, true);
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  if (const ordered_json* s = given(p, "rope_scaling"); s && s->is_object())
    if (const ordered_json* all = given(*s, "mscale_all_dim"); all && as_number(*all, "params.rope_scaling.mscale_all_dim") != 0.0) {
      const double ms = mscale(a.rope.factor, as_number(*all, "params.rope_scaling.mscale_all_dim"));
      a.scale *= ms * ms;
    }
  a.mla = m;
  return a;
}

}  // namespace mha
