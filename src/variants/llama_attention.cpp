// Hugging Face's LlamaAttention (and MistralAttention / Qwen2Attention,
// which add a sliding window): grouped-query attention with rotary position
// embeddings, always causal. Params and state_dict names are the modules'
// config keys and attribute names, so one layer of a checkpoint maps on
// directly:
//   q_proj [H*dh, hidden], k_proj / v_proj [Hkv*dh, hidden], o_proj
//   [hidden, H*dh]; q/k/v biased when qkv_bias, o_proj when o_proj_bias.
// The bias switches default from the family (model_type): Llama's and
// Mistral's attention_bias sets all four, Qwen2 always biases q/k/v and
// never o_proj (its config has no switch).
// Inputs: x [B, L, hidden] (hidden_states), position_ids [B or 1, L]
// (default 0..L-1) and attention_mask [B or 1, L], the models' 2-D padding
// mask (1 attend, 0 padding), applied with the causal / window mask.
#include <cmath>

#include "init/torch_init.h"
#include "util/checked_size.h"
#include "util/error.h"
#include "util/text.h"
#include "variants/common.h"
#include "variants/registry.h"

namespace mha {

namespace {

// The Hugging Face config class a layer comes from (its `model_type`).
enum class LlamaFamily { Llama, Mistral, Qwen2 };

LlamaFamily parse_family(const ordered_json& p) {
  const ordered_json* t = find(p, "model_type");
  if (!t) return LlamaFamily::Llama;
  const std::string v = t->is_string() ? t->get<std::string>() : "";
  if (v == "llama") return LlamaFamily::Llama;
  if (v == "mistral") return LlamaFamily::Mistral;
  if (v == "qwen2") return LlamaFamily::Qwen2;
  throw InputError("params.model_type: expected \"llama\", \"mistral\" or \"qwen2\", found " +
                   printable(t->dump()));
}

struct LlamaParams {
  int64_t hidden, heads, kv_heads, head_dim, window, max_positions;
  int64_t q_width, kv_width;  // heads x head_dim, kv_heads x head_dim
  double theta;
  bool qkv_bias, o_bias;
};

LlamaParams parse_llama(const ordered_json& p) {
  check_params(p, {{"hidden_size"}, {"num_attention_heads"}, {"num_key_value_heads"}, {"head_dim"}, {"rope_theta"},
                   {"attention_bias"}, {"qkv_bias"}, {"o_proj_bias"}, {"model_type"}, {"sliding_window"},
                   {"use_sliding_window"}, {"max_position_embeddings"}});
  const LlamaFamily family = parse_family(p);
  LlamaParams l;
  l.hidden = param_int(p, {"hidden_size"}, std::nullopt);
  l.heads = param_int(p, {"num_attention_heads"}, std::nullopt);
  l.kv_heads = param_int(p, {"num_key_value_heads"}, l.heads);  // absent: no grouping, as the config class defaults
  if (l.heads % l.kv_heads != 0)
    throw InputError("params.num_attention_heads: expected a multiple of params.num_key_value_heads (" +
                     std::to_string(l.kv_heads) + "), found " + std::to_string(l.heads));
  // Absent: hidden_size / num_attention_heads, as the modules default it.
  const ordered_json* hd = find(p, "head_dim");
  if (!hd || hd->is_null()) check_divisible(l.hidden, "hidden_size", l.heads, "num_attention_heads");
  l.head_dim = hd && !hd->is_null() ? as_int(*hd, "params.head_dim", 1) : l.hidden / l.heads;
  if (l.head_dim % 2 != 0)
    throw InputError("params.head_dim: expected an even width (the rotary embedding rotates halves), found " +
                     std::to_string(l.head_dim));
  // The projections' widths: refused here when they overflow, before
  // weight_slots or a backend multiplies them again.
  l.q_width = checked_mul(l.heads, l.head_dim, field("params.num_attention_heads", l.heads) + " x " +
                                                   field("params.head_dim", l.head_dim));
  l.kv_width = checked_mul(l.kv_heads, l.head_dim, field("params.num_key_value_heads", l.kv_heads) + " x " +
                                                       field("params.head_dim", l.head_dim));
  l.theta = param_number(p, {"rope_theta"}, 10000.0);
  if (!(l.theta > 0.0) || !std::isfinite(static_cast<float>(l.theta)))
    throw InputError("params.rope_theta: expected a positive float32 number, found " + std::to_string(l.theta));
  // Qwen2Attention hard-codes its biases; an attention_bias beside
  // model_type qwen2 would be ignored by the module, so it is refused.
  if (family == LlamaFamily::Qwen2 && find(p, "attention_bias"))
    throw InputError("params.attention_bias: not a Qwen2 setting (Qwen2 biases q/k/v and not o_proj); "
                     "use qkv_bias / o_proj_bias to depart from that");
  const bool all = param_bool(p, {"attention_bias"}, false);
  l.qkv_bias = param_bool(p, {"qkv_bias"}, family == LlamaFamily::Qwen2 ? true : all);
  l.o_bias = param_bool(p, {"o_proj_bias"}, family == LlamaFamily::Qwen2 ? false : all);
  // Mistral's configs write null for no window; Qwen2's carry a window
  // that applies only with use_sliding_window (false by default there).
  const bool use_window = param_bool(p, {"use_sliding_window"}, family != LlamaFamily::Qwen2);
  const ordered_json* w = find(p, "sliding_window");
  l.window = use_window && w && !w->is_null() ? as_int(*w, "params.sliding_window", 1) : 0;
  // Accepted and unused, as in the modules: the default rotary embedding
  // does not depend on it (only the scaled variants do), and the modules
  // run past it.
  l.max_positions = param_int(p, {"max_position_embeddings"}, 2048);
  return l;
}

class LlamaAttention : public Variant {
 public:
  explicit LlamaAttention(const ordered_json& p) : p_(parse_llama(p)) {}
  std::string name() const override { return "llama_attention"; }
  std::vector<WeightSlot> weight_slots() const override {
    const int64_t q = p_.q_width, kv = p_.kv_width;
    std::vector<WeightSlot> s;
    add_linear_slots(s, "q_proj", p_.hidden, q, p_.qkv_bias);
    add_linear_slots(s, "k_proj", p_.hidden, kv, p_.qkv_bias);
    add_linear_slots(s, "v_proj", p_.hidden, kv, p_.qkv_bias);
    add_linear_slots(s, "o_proj", q, p_.hidden, p_.o_bias);
    // Older exports (transformers < 4.31) saved inv_freq in the state_dict;
    // it is recomputed from rope_theta, so a saved one is checked and unused.
    WeightSlot inv{"rotary_emb.inv_freq", {p_.head_dim / 2}, {}};
    inv.buffer = true;
    s.push_back(inv);
    return s;
  }
  // nn.Linear q_proj, k_proj, v_proj, o_proj in construction order; the
  // rotary embedding draws nothing.
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    const int64_t q = p_.q_width, kv = p_.kv_width;
    NamedTensors out;
    for (auto [name, in, o, bias] :
         {std::tuple{"q_proj.", p_.hidden, q, p_.qkv_bias}, std::tuple{"k_proj.", p_.hidden, kv, p_.qkv_bias},
          std::tuple{"v_proj.", p_.hidden, kv, p_.qkv_bias}, std::tuple{"o_proj.", q, p_.hidden, p_.o_bias}})
      for (auto& t : init_linear(gen, in, o, bias, name)) out.push_back(std::move(t));
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
    s.q = linear_projection(w, "q_proj", p_.qkv_bias);
    s.k = linear_projection(w, "k_proj", p_.qkv_bias);
    s.v = linear_projection(w, "v_proj", p_.qkv_bias);
    s.out = linear_projection(w, "o_proj", p_.o_bias);
    s.scale = 1.0 / std::sqrt(static_cast<double>(p_.head_dim));
    s.causal = true;
    s.window = p_.window;
    s.rope = RotaryEmbedding{p_.theta};
    s.attention = AttentionKernel::Sdpa;  // tt_transformers' Llama attention
    return s;
  }

 protected:
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    AttentionInputs in = self_attention_inputs(inputs, p_.hidden, 0);
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

 private:
  LlamaParams p_;
};

}  // namespace

std::unique_ptr<Variant> make_llama_attention(const ordered_json& p) { return std::make_unique<LlamaAttention>(p); }

}  // namespace mha
