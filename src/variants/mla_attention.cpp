// DeepSeek-V3's (and Kimi K2's) multi-head latent attention,
// DeepseekV3Attention of transformers' models/deepseek_v3 (variants/hf_mla.cpp
// reads its params, the config keys); always causal. State_dict names are
// the module's attribute names, so one layer of a checkpoint maps on directly:
//   q_a_proj [q_lora_rank, hidden], q_a_layernorm [q_lora_rank],
//   q_b_proj [H (dn + dr), q_lora_rank]   (q_lora_rank null: q_proj [H (dn + dr), hidden])
//   kv_a_proj_with_mqa [kv_lora_rank + dr, hidden], kv_a_layernorm [kv_lora_rank],
//   kv_b_proj [H (dn + dv), kv_lora_rank], o_proj [hidden, H dv]
// with biases on q_a_proj, kv_a_proj_with_mqa and o_proj when attention_bias.
// It maps onto AttentionSpec::mla (model/attention.h): the spec's q is
// q_a_proj (or q_proj), its k and v both kv_a_proj_with_mqa.
// Inputs as llama_attention's: x, position_ids, attention_mask.
#include "init/torch_init.h"
#include "util/error.h"
#include "variants/common.h"
#include "variants/hf_families.h"
#include "variants/registry.h"

namespace mha {

namespace {

// params without model_type are DeepSeek-V3's.
ordered_json with_model_type(const ordered_json& p) {
  ordered_json q = p.is_object() ? p : ordered_json::object();
  if (!find(q, "model_type")) q["model_type"] = "deepseek_v3";
  return q;
}

class MlaAttention : public Variant {
 public:
  explicit MlaAttention(const ordered_json& p) : p_(parse_hf_attention(with_model_type(p))) {
    if (!p_.mla)
      throw InputError("params.model_type: expected deepseek_v3 or kimi_k2 (multi-head latent attention), found " +
                       std::string(hf_family_name(p_.family)) + " (run it as variant llama_attention)");
    m_ = *p_.mla;
  }
  std::string name() const override { return "mla_attention"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    for (const auto& [name, in, out, bias] : linears()) add_linear_slots(s, name, in, out, bias);
    if (m_.q_lora_rank > 0) s.push_back({"q_a_layernorm.weight", {m_.q_lora_rank}, {}});
    s.push_back({"kv_a_layernorm.weight", {m_.kv_lora_rank}, {}});
    return s;
  }
  // nn.Linear draws in construction order; the RMSNorms start at ones.
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    NamedTensors out;
    for (const auto& [name, in, o, bias] : linears())
      for (auto& t : init_linear(gen, in, o, bias, name + ".")) out.push_back(std::move(t));
    if (m_.q_lora_rank > 0)
      out.emplace_back("q_a_layernorm.weight", Tensor::from_f32({m_.q_lora_rank}, std::vector<float>(m_.q_lora_rank, 1.0f)));
    out.emplace_back("kv_a_layernorm.weight",
                     Tensor::from_f32({m_.kv_lora_rank}, std::vector<float>(m_.kv_lora_rank, 1.0f)));
    return out;
  }
  bool self_attends_x() const override { return true; }
  std::vector<InputSlot> input_slots() const override {
    return {{"x", true}, {"position_ids", false}, {"attention_mask", false}};
  }
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s;
    s.variant = name();
    s.num_heads = s.num_kv_heads = p_.heads;
    s.head_dim = p_.head_dim;
    s.head_dim_v = m_.v_dim;
    Mla mla;
    mla.q_lora_rank = m_.q_lora_rank;
    mla.kv_lora_rank = m_.kv_lora_rank;
    mla.nope_dim = m_.nope_dim;
    mla.rope_dim = m_.rope_dim;
    if (m_.q_lora_rank > 0) {
      s.q = linear_projection(w, "q_a_proj", p_.qkv_bias);
      mla.q_norm = w.at("q_a_layernorm.weight");
      mla.q_b = linear_projection(w, "q_b_proj", false);
    } else {
      s.q = linear_projection(w, "q_proj", false);
    }
    s.k = s.v = linear_projection(w, "kv_a_proj_with_mqa", p_.qkv_bias);
    mla.kv_norm = w.at("kv_a_layernorm.weight");
    mla.kv_b = linear_projection(w, "kv_b_proj", false);
    mla.eps = 1e-6;  // DeepseekV3RMSNorm's default: the module passes no eps
    s.mla = std::move(mla);
    s.out = linear_projection(w, "o_proj", p_.o_bias);
    s.scale = p_.scale;
    s.causal = true;
    s.rope = p_.rope;
    return s;
  }

 protected:
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    return hf_decoder_inputs(inputs, p_.hidden, opt);
  }

 private:
  // (prefix, in, out, bias) of every nn.Linear, in construction order.
  std::vector<std::tuple<std::string, int64_t, int64_t, bool>> linears() const {
    std::vector<std::tuple<std::string, int64_t, int64_t, bool>> l;
    if (m_.q_lora_rank > 0)
      l = {{"q_a_proj", p_.hidden, m_.q_lora_rank, p_.qkv_bias}, {"q_b_proj", m_.q_lora_rank, p_.q_width, false}};
    else
      l = {{"q_proj", p_.hidden, p_.q_width, false}};
    l.push_back({"kv_a_proj_with_mqa", p_.hidden, m_.kv_lora_rank + m_.rope_dim, p_.qkv_bias});
    l.push_back({"kv_b_proj", m_.kv_lora_rank, p_.kv_width, false});
    l.push_back({"o_proj", p_.heads * m_.v_dim, p_.hidden, p_.o_bias});
    return l;
  }

  HfLayerAttention p_;
  HfMla m_;
};

}  // namespace

std::unique_ptr<Variant> make_mla_attention(const ordered_json& p) { return std::make_unique<MlaAttention>(p); }

}  // namespace mha
