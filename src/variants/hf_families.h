#pragma once
// The attention of one decoder layer of a Hugging Face model, read from its
// config's fields under Hugging Face's own names (the params of variant
// llama_attention, and what `mha inspect DIR` shows). One parse per family
// (model_type): which weights the layer holds, its widths, scale, softcap,
// QK-norm, sinks, sliding or full, and its rotary embedding with scaling.
// Written from transformers' configuration_<family>.py / modeling_<family>.py
// and modeling_rope_utils.py (main branch, 2025: the YaRN with `truncate`).
// Every field that changes attention is honoured or refused here with one
// line naming it; a field of another family is refused, not ignored.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/json_util.h"
#include "model/attention.h"
#include "variants/variant.h"

namespace mha {

enum class HfFamily { Llama, Mistral, Qwen2, Qwen3, Gemma2, Gemma3, GptOss, Phi3, DeepseekV3 };

// The model_type a family is written as in messages ("gemma3_text" for Gemma 3).
const char* hf_family_name(HfFamily f);
// "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3" / "gemma3_text",
// "gpt_oss", "phi3", "deepseek_v3" (and "kimi_k2", the same layout), and
// the mixture-of-experts siblings whose attention is the dense model's:
// "mixtral" (Mistral), "qwen2_moe", "qwen3_moe"; nullopt for any other.
std::optional<HfFamily> hf_family_from_model_type(const std::string& model_type);

// DeepSeek-V3's multi-head latent attention (variant mla_attention): its
// widths under their config names. q_lora_rank 0: the config's null, q_proj.
struct HfMla {
  int64_t q_lora_rank = 0, kv_lora_rank = 0, nope_dim = 0, rope_dim = 0, v_dim = 0;
  int64_t mtp_layers = 0;  // num_nextn_predict_layers: layers past num_hidden_layers
};

struct HfLayerAttention {
  HfFamily family = HfFamily::Llama;
  int64_t layer = 0;         // layer_idx
  bool layer_given = false;  // params held layer_idx
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_width = 0, kv_width = 0;  // heads x head_dim, kv_heads x head_dim
  bool qkv_bias = false, o_bias = false;
  bool fused_qkv = false;  // Phi-3: one qkv_proj [q_width + 2 kv_width, hidden]
  bool sinks = false;      // gpt-oss: sinks [heads]
  bool qk_norm = false;    // Qwen3, Gemma 3: q_norm / k_norm [head_dim]
  bool qk_norm_offset_one = false;  // Gemma's (1 + w)
  double rms_norm_eps = 1e-6;
  double scale = 1.0;
  double softcap = 0.0;
  bool sliding = false;
  int64_t window = 0;  // tokens a query sees on a sliding layer, its own included; 0 on full layers
  RotaryEmbedding rope;  // this layer's (Gemma 3's local base on sliding layers)
  // DeepSeek-V3 / Kimi K2: head_dim is qk_nope + qk_rope, kv_heads = heads,
  // qkv_bias / o_bias are attention_bias on q_a_proj, kv_a_proj_with_mqa, o_proj.
  std::optional<HfMla> mla;
};

// The variant a layer runs as: "mla_attention" (mla set) or "llama_attention".
const char* hf_variant_name(const HfLayerAttention& a);

// Parses `p` (path "params" in messages): InputError naming the field for
// a missing, contradicting or unsupported one.
HfLayerAttention parse_hf_attention(const ordered_json& p);

// Every key parse_hf_attention reads in some family: the config.json keys a
// folder passes on as params (hf/hf_model.h).
const std::vector<std::string>& hf_attention_keys();

// The families' param readers (hf_families.cpp, hf_rope.cpp): a key present
// and not null (Hugging Face's configs write null for "off"), and a positive
// float32 number (absent: dflt), InputError "params.KEY: ..." otherwise.
const ordered_json* given(const ordered_json& p, const char* key);
double positive_number(const ordered_json& p, const char* key, double dflt);

// DeepSeek-V3's attention (hf_mla.cpp); parse_hf_attention calls it for
// that family after checking the keys.
HfLayerAttention parse_hf_mla(const ordered_json& p);

// The module's inputs: x [B, L, hidden] (hidden_states), position_ids
// [B or 1, L] (default 0..L-1) and attention_mask [B or 1, L], the models'
// 2-D padding mask (1 attend, 0 padding), applied under the causal mask.
AttentionInputs hf_decoder_inputs(const TensorMap& inputs, int64_t hidden, const ForwardOptions& opt);

// One line: "sliding 4096, rope 10000 (default), qk-norm (1+w), softcap 50, sinks".
std::string describe_hf_attention(const HfLayerAttention& a);

}  // namespace mha
