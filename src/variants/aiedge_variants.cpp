// Seed 001 (The AiEdge newsletter): a non-causal MultiHeadAttention with
// biased Q, K, V, O projections, and MultiHeadAttentionV2 with one fused
// qkv Linear whose output the seed splits per head (interleaved).
#include <cmath>

#include "util/checked_size.h"
#include "variants/common.h"
#include "variants/registry.h"
#include "init/torch_init.h"
#include "variants/module_init.h"
#include "tensor/tensor_ops.h"

namespace mha {

// The module's `init: torch` weights (variants/module_init.h).
NamedTensors init_mha_001(TorchGenerator& gen, int64_t d_model, int64_t n_head) {
  check_init_size(d_model, "d_model");
  check_init_heads(d_model, n_head, "d_model");
  NamedTensors r;
  for (const char* name : {"Q.", "K.", "V.", "O."}) append_named(r, init_linear(gen, d_model, d_model, true, name));
  return r;
}

NamedTensors init_mha_v2_001(TorchGenerator& gen, int64_t d_model, int64_t n_head) {
  check_init_size(d_model, "d_model");
  check_init_heads(d_model, n_head, "d_model");
  NamedTensors r = init_linear(gen, d_model, 3 * d_model, true, "qkv_linear.");
  append_named(r, init_linear(gen, d_model, d_model, true, "O."));
  return r;
}

namespace {

class AiEdgeBase : public Variant {
 public:
  explicit AiEdgeBase(const ordered_json& p) {
    check_params(p, {{"d_model"}, {"n_head"}});
    d_model_ = param_int(p, {"d_model"}, std::nullopt);
    checked_mul(3, d_model_, field("params.d_model", d_model_) + " x 3 (the fused q, k, v rows)");
    n_head_ = param_int(p, {"n_head"}, std::nullopt);
    check_divisible(d_model_, "d_model", n_head_, "n_head");
  }
  bool self_attends_x() const override { return true; }  // self_attention_inputs, default finish()
  std::vector<InputSlot> input_slots() const override { return {{"x", true}}; }
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    AttentionInputs in = self_attention_inputs(inputs, d_model_, 0);
    in.training = opt.training;
    return in;
  }

 protected:
  AttentionSpec base_spec() const {
    AttentionSpec s;
    s.variant = name();
    s.ops = OpSequence::Book;  // no TT-NN port of its own: the book's op sequence
    s.num_heads = s.num_kv_heads = n_head_;
    s.head_dim = s.head_dim_v = d_model_ / n_head_;
    s.scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    return s;
  }
  int64_t d_model_, n_head_;
};

class AiEdgeMha : public AiEdgeBase {
 public:
  using AiEdgeBase::AiEdgeBase;
  std::string name() const override { return "mha"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    for (const char* n : {"Q", "K", "V", "O"}) add_linear_slots(s, n, d_model_, d_model_, true);
    return s;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_mha_001(gen, d_model_, n_head_);
  }
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec();
    s.q = linear_projection(w, "Q", true);
    s.k = linear_projection(w, "K", true);
    s.v = linear_projection(w, "V", true);
    s.out = linear_projection(w, "O", true);
    return s;
  }
};

class AiEdgeMhaV2 : public AiEdgeBase {
 public:
  using AiEdgeBase::AiEdgeBase;
  std::string name() const override { return "mha_fused_qkv"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    add_linear_slots(s, "qkv_linear", d_model_, 3 * d_model_, true);
    add_linear_slots(s, "O", d_model_, d_model_, true);
    return s;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_mha_v2_001(gen, d_model_, n_head_);
  }
  // The seed reshapes qkv to (b, s, n_head, 3*d_head) and chunks the last dim,
  // so head h's query rows are qkv rows [h*3*dh, h*3*dh + dh), its key rows
  // the next dh, its value rows the dh after those.
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec();
    const int64_t dh = s.head_dim;
    const Tensor& wf = w.at("qkv_linear.weight");
    const Tensor& bf = w.at("qkv_linear.bias");
    auto part = [&](int64_t which) {
      std::vector<int64_t> rows;
      for (int64_t h = 0; h < n_head_; ++h)
        for (int64_t j = 0; j < dh; ++j) rows.push_back(h * 3 * dh + which * dh + j);
      return Projection{take_rows(wf, rows), take_rows(bf, rows)};
    };
    s.q = part(0);
    s.k = part(1);
    s.v = part(2);
    s.out = linear_projection(w, "O", true);
    return s;
  }
};

}  // namespace

std::unique_ptr<Variant> make_aiedge_mha(const ordered_json& p) { return std::make_unique<AiEdgeMha>(p); }
std::unique_ptr<Variant> make_aiedge_mha_fused_qkv(const ordered_json& p) { return std::make_unique<AiEdgeMhaV2>(p); }

}  // namespace mha
