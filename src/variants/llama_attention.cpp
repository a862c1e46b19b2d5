// Hugging Face's decoder-layer attention of the families mha knows
// (variants/hf_families.h): Llama, Mistral and Qwen2 (grouped-query attention
// with rotary position embeddings, a sliding window), Qwen3 (QK RMSNorm),
// Gemma 2 / Gemma 3 (softcap, query_pre_attn_scalar, QK-norm with (1 + w),
// local and global layers), gpt-oss (sinks, biases, YaRN) and Phi-3 (fused
// qkv_proj, partial rotary); always causal. Params and state_dict names are
// the config keys and the modules' attribute names, so one layer of a
// checkpoint maps on directly:
//   q_proj [H*dh, hidden], k_proj / v_proj [Hkv*dh, hidden] (Phi-3: one
//   qkv_proj [(H + 2 Hkv) dh, hidden]), o_proj [hidden, H*dh]; q_norm /
//   k_norm [dh]; sinks [H]. Biases as the family lays them out
//   (hf_families.cpp), or as qkv_bias / o_proj_bias say.
// Inputs: x [B, L, hidden] (hidden_states), position_ids [B or 1, L]
// (default 0..L-1) and attention_mask [B or 1, L], the models' 2-D padding
// mask (1 attend, 0 padding), applied with the causal / window mask.
#include <cmath>

#include "init/torch_init.h"
#include "tensor/tensor_ops.h"
#include "util/checked_size.h"
#include "util/error.h"
#include "util/text.h"
#include "variants/common.h"
#include "variants/hf_families.h"
#include "variants/registry.h"

namespace mha {

namespace {

class LlamaAttention : public Variant {
 public:
  explicit LlamaAttention(const ordered_json& p) : p_(parse_hf_attention(p)) {
    if (p_.mla)
      throw InputError("params.model_type: " + std::string(hf_family_name(p_.family)) +
                       " is multi-head latent attention: run it as variant mla_attention");
  }
  std::string name() const override { return "llama_attention"; }
  std::vector<WeightSlot> weight_slots() const override {
    const int64_t q = p_.q_width, kv = p_.kv_width;
    std::vector<WeightSlot> s;
    if (p_.fused_qkv) {
      add_linear_slots(s, "qkv_proj", p_.hidden, q + 2 * kv, p_.qkv_bias);
    } else {
      add_linear_slots(s, "q_proj", p_.hidden, q, p_.qkv_bias);
      add_linear_slots(s, "k_proj", p_.hidden, kv, p_.qkv_bias);
      add_linear_slots(s, "v_proj", p_.hidden, kv, p_.qkv_bias);
    }
    add_linear_slots(s, "o_proj", q, p_.hidden, p_.o_bias);
    if (p_.qk_norm) {
      s.push_back({"q_norm.weight", {p_.head_dim}, {}});
      s.push_back({"k_norm.weight", {p_.head_dim}, {}});
    }
    if (p_.sinks) s.push_back({"sinks", {p_.heads}, {}});
    // Older exports (transformers < 4.31) saved inv_freq in the state_dict;
    // it is recomputed from rope_theta, so a saved one is checked and unused.
    const int64_t rotated = p_.rope.rotary_dim > 0 ? p_.rope.rotary_dim : p_.head_dim;
    WeightSlot inv{"rotary_emb.inv_freq", {rotated / 2}, {}};
    inv.buffer = true;
    s.push_back(inv);
    return s;
  }
  // The modules' parameters in construction order: nn.Linear draws (Phi-3
  // builds o_proj before qkv_proj); the norms start at their identity (ones,
  // Gemma's zeros) and gpt-oss's sinks, torch.empty in the module, at 0.
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    const int64_t q = p_.q_width, kv = p_.kv_width;
    std::vector<std::tuple<const char*, int64_t, int64_t, bool>> linears;
    if (p_.fused_qkv)
      linears = {{"o_proj.", q, p_.hidden, p_.o_bias}, {"qkv_proj.", p_.hidden, q + 2 * kv, p_.qkv_bias}};
    else
      linears = {{"q_proj.", p_.hidden, q, p_.qkv_bias}, {"k_proj.", p_.hidden, kv, p_.qkv_bias},
                 {"v_proj.", p_.hidden, kv, p_.qkv_bias}, {"o_proj.", q, p_.hidden, p_.o_bias}};
    NamedTensors out;
    for (auto [name, in, o, bias] : linears)
      for (auto& t : init_linear(gen, in, o, bias, name)) out.push_back(std::move(t));
    const float norm_one = p_.qk_norm_offset_one ? 0.0f : 1.0f;
    if (p_.qk_norm)
      for (const char* n : {"q_norm.weight", "k_norm.weight"})
        out.emplace_back(n, Tensor::from_f32({p_.head_dim}, std::vector<float>(p_.head_dim, norm_one)));
    if (p_.sinks) out.emplace_back("sinks", Tensor::from_f32({p_.heads}, std::vector<float>(p_.heads, 0.0f)));
    return out;
  }
  bool self_attends_x() const override { return true; }  // self_attention_inputs, default finish()
  std::vector<InputSlot> input_slots() const override {
    return {{"x", true}, {"position_ids", false}, {"attention_mask", false}};
  }
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s;
    s.variant = name();
    s.num_heads = p_.heads;
    s.num_kv_heads = p_.kv_heads;
    s.head_dim = s.head_dim_v = p_.head_dim;
    if (p_.fused_qkv) {
      const Projection qkv = linear_projection(w, "qkv_proj", p_.qkv_bias);
      const int64_t q = p_.q_width, kv = p_.kv_width;
      auto part = [&](int64_t start, int64_t count) {
        Projection pr{slice_rows(qkv.weight, start, count), std::nullopt};
        if (qkv.bias) pr.bias = slice_rows(*qkv.bias, start, count);
        return pr;
      };
      s.q = part(0, q), s.k = part(q, kv), s.v = part(q + kv, kv);
    } else {
      s.q = linear_projection(w, "q_proj", p_.qkv_bias);
      s.k = linear_projection(w, "k_proj", p_.qkv_bias);
      s.v = linear_projection(w, "v_proj", p_.qkv_bias);
    }
    s.out = linear_projection(w, "o_proj", p_.o_bias);
    s.scale = p_.scale;
    s.softcap = p_.softcap;
    s.causal = true;
    s.window = p_.window;
    s.rope = p_.rope;
    if (p_.qk_norm) s.qk_norm = QkNorm{w.at("q_norm.weight"), w.at("k_norm.weight"), p_.rms_norm_eps, p_.qk_norm_offset_one};
    if (p_.sinks) s.sinks = w.at("sinks");
    s.attention = AttentionKernel::Sdpa;  // tt_transformers' Llama attention
    return s;
  }

 protected:
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    return hf_decoder_inputs(inputs, p_.hidden, opt);
  }

 private:
  HfLayerAttention p_;
};

}  // namespace

AttentionInputs hf_decoder_inputs(const TensorMap& inputs, int64_t hidden, const ForwardOptions& opt) {
  AttentionInputs in = self_attention_inputs(inputs, hidden, 0);
  in.training = opt.training;
  const int64_t b = in.query.dim(0), l = in.query.dim(1);
  auto batch_rows = [&](const Tensor& t, const char* what) {
    if (t.ndim() != 2 || (t.dim(0) != b && t.dim(0) != 1) || t.dim(1) != l)
      throw InputError(std::string("inputs.") + what + ": expected shape (" + std::to_string(b) + " or 1, " +
                       std::to_string(l) + "), found " + shape_str(t.shape()));
  };
  if (const Tensor* pos = find_input(inputs, "position_ids", false)) {
    if (dtype_is_float(pos->dtype()) || pos->dtype() == DType::Bool)
      throw InputError("inputs.position_ids: expected an integer tensor, found " + std::string(dtype_name(pos->dtype())));
    batch_rows(*pos, "position_ids");
    if (pos->dtype() == DType::U64) {  // past INT64_MAX the cast below would wrap: report the value as written
      const uint64_t* u = pos->data<uint64_t>();
      for (int64_t i = 0; i < pos->numel(); ++i)
        if (u[i] > static_cast<uint64_t>(INT64_MAX))
          throw InputError("inputs.position_ids: expected positions of at most " + std::to_string(INT64_MAX) +
                           ", found " + std::to_string(u[i]) + " at flat index " + std::to_string(i));
    }
    Tensor p64 = pos->cast(DType::I64);
    const int64_t* v = p64.data<int64_t>();
    for (int64_t i = 0; i < p64.numel(); ++i)
      if (v[i] < 0)
        throw InputError("inputs.position_ids: expected non-negative positions, found " + std::to_string(v[i]) +
                         " at flat index " + std::to_string(i));
    in.positions = std::move(p64);
  }
  if (const Tensor* m = find_input(inputs, "attention_mask", false)) {
    batch_rows(*m, "attention_mask");
    // 1 attends, 0 is padding: an additive row [B or 1, 1, 1, L] that
    // every query adds, under the causal / window mask.
    Tensor add(DType::F32, {m->dim(0), 1, 1, l});
    float* dst = add.data<float>();
    for (int64_t i = 0; i < m->numel(); ++i) {
      const double x = m->get_f64(i);
      if (x != 0.0 && x != 1.0)
        throw InputError("inputs.attention_mask: expected 1 (attend) or 0 (padding), found " + std::to_string(x) +
                         " at flat index " + std::to_string(i));
      dst[i] = x == 1.0 ? 0.0f : -INFINITY;
    }
    in.mask = std::move(add);
  }
  return in;
}

std::unique_ptr<Variant> make_llama_attention(const ordered_json& p) { return std::make_unique<LlamaAttention>(p); }

}  // namespace mha
