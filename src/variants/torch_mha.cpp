// Seed 004: torch.nn.MultiheadAttention with PyTorch 1.13's semantics:
// separate query/key/value (cross-attention), kdim/vdim, bias_k/bias_v,
// add_zero_attn, bool or float attn_mask (2-D (L, S) or 3-D (N*H, L, S)),
// key_padding_mask (N, S), need_weights / average_attn_weights, batch_first.
// torch 1.13 has no is_causal argument; here it means attn_mask =
// triu(ones(L, S), diagonal=1).bool(), as seed 004 builds it by hand.
#include <cmath>
#include <cstring>
#include <limits>

#include "util/checked_size.h"
#include "util/error.h"
#include "variants/common.h"
#include "variants/registry.h"
#include "init/torch_init.h"
#include "variants/module_init.h"
#include "tensor/tensor_ops.h"

namespace mha {

// The module's `init: torch` weights (variants/module_init.h).
NamedTensors init_torch_mha(TorchGenerator& gen, const TorchMhaParams& p) {
  const int64_t e = p.embed_dim;
  const int64_t kdim = p.kdim < 0 ? e : p.kdim, vdim = p.vdim < 0 ? e : p.vdim;
  check_init_size(e, "embed_dim");
  check_init_heads(e, p.num_heads, "embed_dim");
  NamedTensors out_proj = init_linear(gen, e, e, p.bias, "out_proj.");

  NamedTensors r;
  if (kdim == e && vdim == e) {
    r.emplace_back("in_proj_weight", xavier_uniform(gen, {3 * e, e}));
  } else {
    r.emplace_back("q_proj_weight", xavier_uniform(gen, {e, e}));
    r.emplace_back("k_proj_weight", xavier_uniform(gen, {e, kdim}));
    r.emplace_back("v_proj_weight", xavier_uniform(gen, {e, vdim}));
  }
  if (p.bias) {
    r.emplace_back("in_proj_bias", Tensor(DType::F32, {3 * e}));
    out_proj[1].second = Tensor(DType::F32, {e});  // constant_(0) after its draws
  }
  if (p.add_bias_kv) {
    r.emplace_back("bias_k", xavier_normal(gen, {1, 1, e}));
    r.emplace_back("bias_v", xavier_normal(gen, {1, 1, e}));
  }
  append_named(r, std::move(out_proj));
  return r;
}

namespace {

const float kNegInf = -std::numeric_limits<float>::infinity();

class TorchMha : public Variant {
 public:
  explicit TorchMha(const ordered_json& p) {
    check_params(p, {{"embed_dim"}, {"num_heads"}, {"dropout"}, {"bias"}, {"add_bias_kv"}, {"add_zero_attn"},
                     {"kdim"}, {"vdim"}, {"batch_first"}});
    e_ = param_int(p, {"embed_dim"}, std::nullopt);
    checked_mul(3, e_, field("params.embed_dim", e_) + " x 3 (the fused q, k, v rows)");
    h_ = param_int(p, {"num_heads"}, std::nullopt);
    check_divisible(e_, "embed_dim", h_, "num_heads");
    dropout_ = param_number(p, {"dropout"}, 0.0);
    if (!(dropout_ >= 0.0 && dropout_ < 1.0))
      throw InputError("params.dropout: expected a probability in [0, 1), found " + std::to_string(dropout_));
    bias_ = param_bool(p, {"bias"}, true);
    add_bias_kv_ = param_bool(p, {"add_bias_kv"}, false);
    add_zero_attn_ = param_bool(p, {"add_zero_attn"}, false);
    auto dim_or_embed = [&](const char* k) {
      const ordered_json* v = find(p, k);
      return (!v || v->is_null()) ? e_ : as_int(*v, std::string("params.") + k, 1);
    };
    kdim_ = dim_or_embed("kdim");
    vdim_ = dim_or_embed("vdim");
    batch_first_ = param_bool(p, {"batch_first"}, false);
  }

  std::string name() const override { return "torch_mha"; }
  bool same_dims() const { return kdim_ == e_ && vdim_ == e_; }

  std::vector<WeightSlot> weight_slots() const override {
    std::vector<WeightSlot> s;
    if (same_dims()) {
      s.push_back({"in_proj_weight", {3 * e_, e_}, {}});
    } else {
      s.push_back({"q_proj_weight", {e_, e_}, {}});
      s.push_back({"k_proj_weight", {e_, kdim_}, {}});
      s.push_back({"v_proj_weight", {e_, vdim_}, {}});
    }
    if (bias_) s.push_back({"in_proj_bias", {3 * e_}, {}});
    if (add_bias_kv_) {
      s.push_back({"bias_k", {1, 1, e_}, {}});
      s.push_back({"bias_v", {1, 1, e_}, {}});
    }
    add_linear_slots(s, "out_proj", e_, e_, bias_);
    return s;
  }

  NamedTensors init_torch(uint64_t seed) const override {
    TorchGenerator gen(seed);
    return init_torch_mha(gen, TorchMhaParams{e_, h_, bias_, add_bias_kv_, kdim_, vdim_});
  }

  std::vector<InputSlot> input_slots() const override {
    return {{"query", true}, {"key", true}, {"value", true}, {"attn_mask", false}, {"key_padding_mask", false}};
  }

  ForwardOptions parse_options(const ordered_json& options) const override {
    check_keys(options, "options", {"need_weights", "average_attn_weights", "is_causal", "training"});
    ForwardOptions o;
    o.need_weights = get_bool(options, "need_weights", "options", true);  // torch's default
    o.average_attn_weights = get_bool(options, "average_attn_weights", "options", true);
    o.is_causal = get_bool(options, "is_causal", "options", false);
    o.training = get_bool(options, "training", "options", false);
    return o;
  }

  AttentionSpec build_spec(const TensorMap& w, const ForwardOptions& opt) const override {
    AttentionSpec s;
    s.variant = name();
    s.ops = OpSequence::Book;  // no TT-NN port of its own: the book's op sequence
    s.num_heads = s.num_kv_heads = h_;
    s.head_dim = s.head_dim_v = e_ / h_;
    s.scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    s.dropout = dropout_;
    std::optional<Tensor> b;
    if (bias_) b = w.at("in_proj_bias");
    for (int64_t part = 0; part < 3; ++part) {
      Projection p;
      p.weight = same_dims() ? slice_rows(w.at("in_proj_weight"), part * e_, e_)
                             : w.at(part == 0 ? "q_proj_weight" : part == 1 ? "k_proj_weight" : "v_proj_weight");
      if (b) p.bias = slice_rows(*b, part * e_, e_);
      (part == 0 ? s.q : part == 1 ? s.k : s.v) = std::move(p);
    }
    s.out = linear_projection(w, "out_proj", bias_);
    if (add_bias_kv_) {
      s.bias_k = w.at("bias_k").reshaped({e_});
      s.bias_v = w.at("bias_v").reshaped({e_});
    }
    s.add_zero_attn = add_zero_attn_;
    // Causal needs no mask unless extra key columns exist, which torch pads
    // as unmasked; then build_mask materialises it.
    s.causal = opt.is_causal && !add_bias_kv_ && !add_zero_attn_;
    if (s.causal) s.attention = AttentionKernel::Sdpa;  // TT-NN's causal attention is its SDPA
    return s;
  }

  AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const override {
    Tensor q = float_input(*find_input(inputs, "query", true), "query");
    Tensor k = float_input(*find_input(inputs, "key", true), "key");
    Tensor v = float_input(*find_input(inputs, "value", true), "value");
    const bool unbatched = q.ndim() == 2;
    int want = unbatched ? 2 : 3;
    if (q.ndim() != want && q.ndim() != 3)
      throw InputError("inputs.query: expected 2 or 3 dims, found " + shape_str(q.shape()));
    if (k.ndim() != want || v.ndim() != want)
      throw InputError("inputs.key/value: expected " + std::to_string(want) + " dims like query " +
                       shape_str(q.shape()) + ", found " + shape_str(k.shape()) + " and " + shape_str(v.shape()));
    AttentionInputs in;
    in.unbatched = unbatched;
    in.query = to_batch_first(q, e_, "query");
    in.key = to_batch_first(k, kdim_, "key");
    in.value = to_batch_first(v, vdim_, "value");
    const int64_t n = in.query.dim(0), l = in.query.dim(1), s = in.key.dim(1);
    if (in.key.dim(0) != n || in.value.dim(0) != n || in.value.dim(1) != s)
      throw InputError("inputs: query " + shape_str(q.shape()) + ", key " + shape_str(k.shape()) + " and value " +
                       shape_str(v.shape()) + " disagree on batch or source length");
    in.training = opt.training;
    build_mask(inputs, opt, n, l, s, in);
    return in;
  }

  AttentionResult finish(AttentionResult r, const ForwardOptions& opt, const AttentionInputs& in) const override {
    if (!batch_first_ && !in.unbatched) r.output = swap01(r.output);
    if (in.unbatched) r.output = r.output.reshaped({r.output.dim(1), r.output.dim(2)});
    if (r.weights && opt.average_attn_weights) {
      // weights.sum(dim=1) / num_heads, as torch 1.13 averages.
      const Tensor& w = *r.weights;
      int64_t n = w.dim(0), h = w.dim(1), l = w.dim(2), s = w.dim(3);
      std::vector<double> x = w.to_f64(), avg(n * l * s, 0.0);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t i = 0; i < l * s; ++i) avg[b * l * s + i] += x[(b * h + hh) * l * s + i];
      for (double& a : avg) a /= static_cast<double>(h);
      Tensor t = Tensor::from_f64({n, l, s}, avg);
      r.weights = w.dtype() == DType::F64 ? t : t.cast(w.dtype());
    }
    if (r.weights && in.unbatched) {
      Shape sh = r.weights->shape();
      sh.erase(sh.begin());
      r.weights = r.weights->reshaped(sh);
    }
    return r;
  }

 private:
  static Tensor swap01(const Tensor& t) {
    int64_t a = t.dim(0), b = t.dim(1), c = t.numel() / std::max<int64_t>(a * b, 1);
    Tensor o(t.dtype(), {b, a, t.dim(2)});
    std::size_t es = dtype_size(t.dtype());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::memcpy(o.raw() + ((j * a + i) * c) * es, t.raw() + ((i * b + j) * c) * es, c * es);
    return o;
  }

  Tensor to_batch_first(const Tensor& t, int64_t dim, const char* name) const {
    if (t.dim(-1) != dim)
      throw InputError(std::string("inputs.") + name + ": expected last dim " + std::to_string(dim) + ", found " +
                       shape_str(t.shape()));
    if (t.ndim() == 2) return t.reshaped({1, t.dim(0), t.dim(1)});
    return batch_first_ ? t : swap01(t);
  }

  // Merges attn_mask, key_padding_mask and is_causal into one additive mask
  // [N or 1, H or 1, L, S + extras] the way F.multi_head_attention_forward
  // does: pad for bias_k/v and zero-attn columns with 0 / False, OR bool
  // masks, masked_fill float ones with -inf, then turn bool into 0 / -inf.
  void build_mask(const TensorMap& inputs, const ForwardOptions& opt, int64_t n, int64_t l, int64_t s,
                  AttentionInputs& in) const {
    const Tensor* am = find_input(inputs, "attn_mask", false);
    const Tensor* kpm = find_input(inputs, "key_padding_mask", false);
    const int64_t st = s + (add_bias_kv_ ? 1 : 0) + (add_zero_attn_ ? 1 : 0);
    if (opt.is_causal && am) throw InputError("options.is_causal: give either is_causal or inputs.attn_mask, not both");
    // With no extra columns the spec's causal flag already masks j > i.
    const bool causal_in_mask = opt.is_causal && st != s;
    if (!am && !kpm && !causal_in_mask) return;
    // Attention mask as [A, L, S]; A = 1 or N*H.
    int64_t a = 1;
    bool am_bool = true;
    std::vector<double> amv;
    if (am) {
      am_bool = am->dtype() == DType::Bool || am->dtype() == DType::U8;
      if (!am_bool && !dtype_is_float(am->dtype()))
        throw InputError(std::string("inputs.attn_mask: expected bool or floating dtype, found ") + dtype_name(am->dtype()));
      if (am->ndim() == 2) {
        if (am->dim(0) != l || am->dim(1) != s)
          throw InputError("inputs.attn_mask: expected 2-D shape (" + std::to_string(l) + ", " + std::to_string(s) +
                           "), found " + shape_str(am->shape()));
      } else if (am->ndim() == 3) {
        if (am->dim(0) != n * h_ || am->dim(1) != l || am->dim(2) != s)
          throw InputError("inputs.attn_mask: expected 3-D shape (" + std::to_string(n * h_) + ", " +
                           std::to_string(l) + ", " + std::to_string(s) + "), found " + shape_str(am->shape()));
        a = n * h_;
      } else {
        throw InputError("inputs.attn_mask: expected 2-D (L, S) or 3-D (N*num_heads, L, S), found " +
                         shape_str(am->shape()));
      }
      amv = am->to_f64();
    } else if (causal_in_mask) {
      amv.assign(l * s, 0.0);
      for (int64_t i = 0; i < l; ++i)
        for (int64_t j = i + 1; j < s; ++j) amv[i * s + j] = 1.0;
    }
    std::vector<double> kpv;
    bool kpm_bool = true;
    if (kpm) {
      // torch 1.13 asserts "only bool and floating types of key_padding_mask
      // are supported": unlike attn_mask, a uint8 one is refused, not converted.
      kpm_bool = kpm->dtype() == DType::Bool;
      if (!kpm_bool && !dtype_is_float(kpm->dtype()))
        throw InputError(std::string("inputs.key_padding_mask: expected bool or floating dtype (as torch 1.13), "
                                     "found ") + dtype_name(kpm->dtype()));
      Shape want = in.unbatched ? Shape{s} : Shape{n, s};
      if (kpm->shape() != want)
        throw InputError("inputs.key_padding_mask: expected shape " + shape_str(want) + ", found " +
                         shape_str(kpm->shape()));
      if (!kpm_bool && am && !am_bool)
        throw InputError("inputs.key_padding_mask: a float key_padding_mask with a float attn_mask is not applied by "
                         "torch 1.13 (its masked_fill leaves the scores unchanged for a non-bool mask, so the padding "
                         "would be silently dropped); give a bool key_padding_mask or a bool attn_mask");
      kpv = kpm->to_f64();
    }
    const bool have_am = am || causal_in_mask;
    const int64_t bm = (kpm || a > 1) ? n : 1, hm = a > 1 ? h_ : 1;
    Tensor mask(DType::F32, {bm, hm, l, st});
    float* out = mask.data<float>();
    for (int64_t b = 0; b < bm; ++b)
      for (int64_t hh = 0; hh < hm; ++hh)
        for (int64_t i = 0; i < l; ++i)
          for (int64_t j = 0; j < st; ++j) {
            double m = 0.0;  // padded columns: False / 0
            bool masked = false;
            if (have_am && j < s) {
              double x = amv[((a > 1 ? b * h_ + hh : 0) * l + i) * s + j];
              if (am_bool) masked = x != 0.0;
              else m = x;
            }
            if (kpm && j < s) {
              double x = kpv[(in.unbatched ? 0 : b) * s + j];
              // is_causal stands for a bool attn_mask even when the spec applies it.
              if (kpm_bool || (have_am && am_bool) || opt.is_causal) masked = masked || x != 0.0;
              else m = x;  // float key_padding_mask alone is added as is
            }
            out[((b * hm + hh) * l + i) * st + j] = masked ? kNegInf : static_cast<float>(m);
          }
    in.mask = std::move(mask);
  }

  int64_t e_, h_, kdim_, vdim_;
  double dropout_;
  bool bias_, add_bias_kv_, add_zero_attn_, batch_first_;
};

}  // namespace

std::unique_ptr<Variant> make_torch_mha(const ordered_json& p) { return std::make_unique<TorchMha>(p); }

}  // namespace mha
