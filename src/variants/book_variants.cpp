// Seeds 000 and 003 (Build an LLM From Scratch): CausalAttention,
// MultiHeadAttentionWrapper and the batched MultiHeadAttention. Seed 003
// spells the arguments dimension_inputs / dimensions_in and the weights
// W_q / output_projection: both spellings are accepted. Seed 000's
// CausalAttention bugs (keys from W_query, a discarded masked_fill) are not
// reproduced: mha runs the intended layer (docs/RUN.md, "Semantics where a seed or
// PyTorch leaves room").
#include <cmath>

#include "util/checked_size.h"
#include "util/error.h"
#include "variants/common.h"
#include "variants/registry.h"
#include "init/torch_init.h"
#include "variants/module_init.h"
#include "tensor/tensor_ops.h"

namespace mha {

// The module's `init: torch` weights (variants/module_init.h).
NamedTensors init_causal_attention(TorchGenerator& gen, int64_t d_in, int64_t d_out, bool qkv_bias) {
  NamedTensors r;
  for (const char* name : {"W_query.", "W_key.", "W_value."})
    append_named(r, init_linear(gen, d_in, d_out, qkv_bias, name));
  return r;
}

NamedTensors init_mha_wrapper(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                              bool qkv_bias) {
  check_init_size(num_heads, "num_heads");
  NamedTensors r;
  for (int64_t i = 0; i < num_heads; ++i)
    append_named(r, init_causal_attention(gen, d_in, d_out, qkv_bias), "heads." + std::to_string(i) + ".");
  return r;
}

NamedTensors init_book_mha(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                           bool qkv_bias) {
  check_init_size(num_heads, "num_heads");
  NamedTensors r = init_causal_attention(gen, d_in, d_out, qkv_bias);
  append_named(r, init_linear(gen, d_out, d_out, true, "out_proj."));
  return r;
}

namespace {

struct BookParams {
  int64_t d_in, d_out, context_length, num_heads;
  double dropout;
  bool qkv_bias;
};

BookParams parse_book(const ordered_json& p, bool has_heads) {
  if (has_heads)
    check_params(p, {{"d_in", "dimension_inputs", "dimensions_in"}, {"d_out", "dimension_outputs", "dimensions_out"},
                     {"context_length"}, {"dropout"}, {"num_heads"}, {"qkv_bias"}});
  else
    check_params(p, {{"d_in", "dimension_inputs", "dimensions_in"}, {"d_out", "dimension_outputs", "dimensions_out"},
                     {"context_length"}, {"dropout"}, {"qkv_bias"}});
  BookParams b;
  b.d_in = param_int(p, {"d_in", "dimension_inputs", "dimensions_in"}, std::nullopt);
  b.d_out = param_int(p, {"d_out", "dimension_outputs", "dimensions_out"}, std::nullopt);
  b.context_length = param_int(p, {"context_length"}, std::nullopt);
  b.dropout = param_number(p, {"dropout"}, 0.0);
  if (!(b.dropout >= 0.0 && b.dropout < 1.0))
    throw InputError("params.dropout: expected a probability in [0, 1), found " + std::to_string(b.dropout));
  b.num_heads = has_heads ? param_int(p, {"num_heads"}, std::nullopt) : 1;
  b.qkv_bias = param_bool(p, {"qkv_bias"}, false);
  // mha_wrapper keeps num_heads separate heads of d_out x d_in (three
  // projections each, plus per-head bookkeeping): sized here, before a slot
  // list num_heads long is built.
  if (has_heads) {
    const std::string what = "params: " + field("num_heads", b.num_heads) + " x 3 x " + field("d_out", b.d_out) +
                             " x (" + field("d_in", b.d_in) + " + 1)";
    const int64_t per_head =
        checked_add(checked_mul(checked_mul(3, b.d_out, what), checked_add(b.d_in, 1, what), what), 64, what);
    check_bytes(checked_mul(b.num_heads, per_head, what), 8, what);
  }
  return b;
}

class BookVariant : public Variant {
 public:
  explicit BookVariant(BookParams p) : p_(p) {}
  bool self_attends_x() const override { return true; }  // self_attention_inputs, default finish()
  std::vector<InputSlot> input_slots() const override { return {{"x", true}}; }
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    AttentionInputs in = self_attention_inputs(inputs, p_.d_in, p_.context_length);
    in.training = opt.training;
    return in;
  }

 protected:
  // Seed 003 registers its causal mask as a buffer, so exports carry it.
  WeightSlot mask_buffer(const std::string& prefix) const {
    WeightSlot w{prefix + "mask", {p_.context_length, p_.context_length}, {}};
    w.buffer = true;
    return w;
  }
  AttentionSpec base_spec(int64_t heads, int64_t head_dim) const {
    AttentionSpec s;
    s.variant = name();
    s.ops = OpSequence::Book;  // seed 000 ported this module to TT-NN
    s.num_heads = s.num_kv_heads = heads;
    s.head_dim = s.head_dim_v = head_dim;
    s.scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    s.causal = true;
    s.dropout = p_.dropout;
    return s;
  }
  BookParams p_;
};

class CausalAttention : public BookVariant {
 public:
  using BookVariant::BookVariant;
  std::string name() const override { return "causal_attention"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    add_linear_slots(s, "W_query", p_.d_in, p_.d_out, p_.qkv_bias, "W_q");
    add_linear_slots(s, "W_key", p_.d_in, p_.d_out, p_.qkv_bias, "W_k");
    add_linear_slots(s, "W_value", p_.d_in, p_.d_out, p_.qkv_bias, "W_v");
    s.push_back(mask_buffer(""));
    return s;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_causal_attention(gen, p_.d_in, p_.d_out, p_.qkv_bias);
  }
  // One head of width d_out: scale 1/sqrt(d_out).
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec(1, p_.d_out);
    s.q = linear_projection(w, "W_query", p_.qkv_bias);
    s.k = linear_projection(w, "W_key", p_.qkv_bias);
    s.v = linear_projection(w, "W_value", p_.qkv_bias);
    return s;
  }
};

class Wrapper : public BookVariant {
 public:
  using BookVariant::BookVariant;
  std::string name() const override { return "mha_wrapper"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    for (int64_t h = 0; h < p_.num_heads; ++h) {
      std::string pre = "heads." + std::to_string(h) + ".";
      add_linear_slots(s, pre + "W_query", p_.d_in, p_.d_out, p_.qkv_bias, pre + "W_q");
      add_linear_slots(s, pre + "W_key", p_.d_in, p_.d_out, p_.qkv_bias, pre + "W_k");
      add_linear_slots(s, pre + "W_value", p_.d_in, p_.d_out, p_.qkv_bias, pre + "W_v");
      s.push_back(mask_buffer(pre));
    }
    return s;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_mha_wrapper(gen, p_.d_in, p_.d_out, p_.num_heads, p_.qkv_bias);
  }
  // num_heads independent heads of width d_out each, concatenated: the same
  // as one projection whose rows stack every head's rows, no output proj.
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec(p_.num_heads, p_.d_out);
    auto stack = [&](const char* leaf) {
      Projection p;
      std::vector<Tensor> ws, bs;
      for (int64_t h = 0; h < p_.num_heads; ++h) {
        std::string pre = "heads." + std::to_string(h) + "." + leaf;
        ws.push_back(w.at(pre + ".weight"));
        if (p_.qkv_bias) bs.push_back(w.at(pre + ".bias"));
      }
      p.weight = concat_rows(ws);
      if (p_.qkv_bias) p.bias = concat_rows(bs);
      return p;
    };
    s.q = stack("W_query");
    s.k = stack("W_key");
    s.v = stack("W_value");
    return s;
  }
};

class BookMha : public BookVariant {
 public:
  explicit BookMha(BookParams p) : BookVariant(p) { check_divisible(p.d_out, "d_out", p.num_heads, "num_heads"); }
  std::string name() const override { return "mha_causal"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    add_linear_slots(s, "W_query", p_.d_in, p_.d_out, p_.qkv_bias, "W_q");
    add_linear_slots(s, "W_key", p_.d_in, p_.d_out, p_.qkv_bias, "W_k");
    add_linear_slots(s, "W_value", p_.d_in, p_.d_out, p_.qkv_bias, "W_v");
    add_linear_slots(s, "out_proj", p_.d_out, p_.d_out, true, "output_projection");
    s.push_back(mask_buffer(""));
    return s;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_book_mha(gen, p_.d_in, p_.d_out, p_.num_heads, p_.qkv_bias);
  }
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec(p_.num_heads, p_.d_out / p_.num_heads);
    s.q = linear_projection(w, "W_query", p_.qkv_bias);
    s.k = linear_projection(w, "W_key", p_.qkv_bias);
    s.v = linear_projection(w, "W_value", p_.qkv_bias);
    s.out = linear_projection(w, "out_proj", true);
    s.attention = AttentionKernel::Sdpa;  // causal: TT-NN would run it as its Llama attention does
    return s;
  }
};

}  // namespace

std::unique_ptr<Variant> make_causal_attention(const ordered_json& p) {
  return std::make_unique<CausalAttention>(parse_book(p, false));
}
std::unique_ptr<Variant> make_mha_wrapper(const ordered_json& p) { return std::make_unique<Wrapper>(parse_book(p, true)); }
std::unique_ptr<Variant> make_mha_causal(const ordered_json& p) { return std::make_unique<BookMha>(parse_book(p, true)); }

}  // namespace mha
