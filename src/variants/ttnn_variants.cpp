// Seed 002 (the TT-NN tutorial): BERT-style attention written with plain
// TT-NN ops (ttnn_mha) and the optimised fused version (ttnn_mha_fused).
// Weights are stored (in x out) and used as x @ W + b; the mask is additive,
// shape (b, 1, 1, s).
#include <cmath>
#include <cstring>

#include "util/checked_size.h"
#include "util/error.h"
#include "variants/common.h"
#include "variants/registry.h"
#include "init/torch_init.h"
#include "variants/module_init.h"
#include "tensor/tensor_ops.h"

namespace mha {

namespace {

// fuse_ttnn_qkv's pieces.
const Tensor& find(const NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts)
    if (n == name) return t;
  throw InputError("init: fuse_ttnn_qkv: missing tensor " + name);
}

Tensor concat_last(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t cols = a.dim(-1), rows = a.numel() / (cols ? cols : 1);
  Shape shape = a.shape();
  shape.back() = 3 * cols;
  Tensor t(DType::F32, shape);
  float* dst = t.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (const Tensor* part : {&a, &b, &c}) {
      std::memcpy(dst, part->data<float>() + r * cols, sizeof(float) * cols);
      dst += cols;
    }
  return t;
}

}  // namespace

// The module's `init: torch` / `init: rand` weights (variants/module_init.h).
NamedTensors init_ttnn_torch(TorchGenerator& gen, int64_t hidden_size) {
  NamedTensors r;
  for (const char* name : {"query", "key", "value", "output"}) {
    NamedTensors lin = init_linear(gen, hidden_size, hidden_size, true);
    r.emplace_back(std::string(name) + "_weight", transpose2d(lin[0].second));
    r.emplace_back(std::string(name) + "_bias", std::move(lin[1].second));
  }
  return r;
}

NamedTensors init_ttnn_rand(TorchGenerator& gen, int64_t hidden_size) {
  check_init_size(hidden_size, "hidden_size");
  NamedTensors r;
  for (const char* name : {"query", "key", "value", "output"}) {
    r.emplace_back(std::string(name) + "_weight", gen.rand({hidden_size, hidden_size}));
    r.emplace_back(std::string(name) + "_bias", gen.rand({hidden_size}));
  }
  return r;
}

NamedTensors fuse_ttnn_qkv(const NamedTensors& w) {
  NamedTensors r;
  r.emplace_back("fused_qkv_weight",
                 concat_last(find(w, "query_weight"), find(w, "key_weight"), find(w, "value_weight")));
  r.emplace_back("fused_qkv_bias", concat_last(find(w, "query_bias"), find(w, "key_bias"), find(w, "value_bias")));
  r.emplace_back("self_output_weight", find(w, "output_weight"));
  r.emplace_back("self_output_bias", find(w, "output_bias"));
  return r;
}

namespace {

class TtnnBase : public Variant {
 public:
  explicit TtnnBase(const ordered_json& p) {
    check_params(p, {{"hidden_size"}, {"num_heads"}});
    hidden_ = param_int(p, {"hidden_size"}, std::nullopt);
    checked_mul(3, hidden_, field("params.hidden_size", hidden_) + " x 3 (the fused q, k, v rows)");
    heads_ = param_int(p, {"num_heads"}, std::nullopt);
    check_divisible(hidden_, "hidden_size", heads_, "num_heads");
  }
  bool self_attends_x() const override { return true; }  // self_attention_inputs, default finish()
  std::vector<InputSlot> input_slots() const override { return {{"x", true}, {"attention_mask", false}}; }

  // x [B, S, hidden]; attention_mask (B or 1, 1, 1, S) passes through as
  // one row that every query row adds (AttentionInputs::mask broadcasts it),
  // as ttnn.add broadcasts it on the device.
  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    AttentionInputs in = self_attention_inputs(inputs, hidden_, 0);
    in.training = opt.training;
    if (const Tensor* m = find_input(inputs, "attention_mask", false)) {
      Tensor mask = as_f32(float_input(*m, "attention_mask"));  // the canonical mask is float32
      int64_t b = in.query.dim(0), s = in.query.dim(1);
      if (mask.ndim() != 4 || (mask.dim(0) != b && mask.dim(0) != 1) || mask.dim(1) != 1 || mask.dim(2) != 1 ||
          mask.dim(3) != s)
        throw InputError("inputs.attention_mask: expected shape (" + std::to_string(b) + ", 1, 1, " +
                         std::to_string(s) + "), found " + shape_str(mask.shape()));
      in.mask = std::move(mask);
    }
    return in;
  }
  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return to_layout(init_ttnn_torch(gen, hidden_));
  }
  NamedTensors init_rand(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return to_layout(init_ttnn_rand(gen, hidden_));
  }

 protected:
  // The separate query/key/value/output weights in this variant's layout.
  virtual NamedTensors to_layout(NamedTensors separate) const { return separate; }
  AttentionSpec base_spec(OpSequence ops) const {
    AttentionSpec s;
    s.variant = name();
    s.ops = ops;
    s.num_heads = s.num_kv_heads = heads_;
    s.head_dim = s.head_dim_v = hidden_ / heads_;
    s.scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    return s;
  }
  int64_t hidden_, heads_;
};

class TtnnMha : public TtnnBase {
 public:
  using TtnnBase::TtnnBase;
  std::string name() const override { return "ttnn_mha"; }
  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    for (std::string n : {"query", "key", "value", "output"}) {
      s.push_back({n + "_weight", {hidden_, hidden_}, {}});
      s.push_back({n + "_bias", {hidden_}, {}});
    }
    return s;
  }
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec(OpSequence::TtnnMha);
    // Stored (in, out): the canonical (out, in) copy for the other
    // backends, the stored one for tt-sim's x @ W.
    auto proj = [&](const std::string& n) {
      const Tensor& wt = w.at(n + "_weight");
      return Projection{transpose2d(wt), w.at(n + "_bias"), wt};
    };
    s.q = proj("query");
    s.k = proj("key");
    s.v = proj("value");
    s.out = proj("output");
    return s;
  }
};

class TtnnMhaFused : public TtnnBase {
 public:
  using TtnnBase::TtnnBase;
  std::string name() const override { return "ttnn_mha_fused"; }
  std::vector<WeightSlot> weight_slots() const override {
    return {{"fused_qkv_weight", {hidden_, 3 * hidden_}, {}},
            {"fused_qkv_bias", {3 * hidden_}, {}},
            {"self_output_weight", {hidden_, hidden_}, {}},
            {"self_output_bias", {hidden_}, {}}};
  }
  // fused_qkv columns are [Q all heads | K all heads | V all heads]. The
  // spec keeps the fused form as stored (tt-sim uploads it as is) and its
  // (out, in) row slices as q, k, v for the other backends.
  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions&) const override {
    AttentionSpec s = base_spec(OpSequence::TtnnMhaFused);
    const Tensor& stored = w.at("fused_qkv_weight");  // [h, 3h]
    Tensor wt = transpose2d(stored);                  // [3h, h]
    const Tensor& b = w.at("fused_qkv_bias");
    for (int64_t part = 0; part < 3; ++part) {
      Projection p{slice_rows(wt, part * hidden_, hidden_), slice_rows(b, part * hidden_, hidden_), std::nullopt};
      (part == 0 ? s.q : part == 1 ? s.k : s.v) = p;
    }
    s.qkv_fused = Projection{wt, b, stored};
    const Tensor& wo = w.at("self_output_weight");
    s.out = Projection{transpose2d(wo), w.at("self_output_bias"), wo};
    return s;
  }

 protected:
  // As the seed's pre-processing: concat weights and biases on the last dim.
  NamedTensors to_layout(NamedTensors separate) const override { return fuse_ttnn_qkv(separate); }
};

}  // namespace

std::unique_ptr<Variant> make_ttnn_mha(const ordered_json& p) { return std::make_unique<TtnnMha>(p); }
std::unique_ptr<Variant> make_ttnn_mha_fused(const ordered_json& p) { return std::make_unique<TtnnMhaFused>(p); }

}  // namespace mha
