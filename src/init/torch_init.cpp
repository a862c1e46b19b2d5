#include "init/torch_init.h"

#include "tensor/tensor_ops.h"

#include <cmath>
#include <cstring>

#include "util/error.h"

namespace mha {
namespace {

void check_dim(int64_t v, const char* what) {
  if (v < 0) throw InputError(std::string("init: ") + what + " must be >= 0, found " + std::to_string(v));
}

void check_heads(int64_t width, int64_t heads, const char* width_name) {
  if (heads <= 0) throw InputError("init: num_heads must be > 0, found " + std::to_string(heads));
  if (width % heads != 0)
    throw InputError(std::string("init: ") + width_name + " (" + std::to_string(width) +
                     ") must be divisible by the number of heads (" + std::to_string(heads) + ")");
}

void append(NamedTensors& to, NamedTensors from, const std::string& prefix = "") {
  for (auto& [name, t] : from) to.emplace_back(prefix + name, std::move(t));
}

Tensor uniform_tensor(TorchGenerator& gen, Shape shape, double bound) {
  Tensor t(DType::F32, std::move(shape));
  gen.uniform_(t.data<float>(), t.numel(), -bound, bound);
  return t;
}

// nn.init's fans for a tensor of >= 2 dims: fan_in = size(1) * receptive
// field, fan_out = size(0) * receptive field.
void fans(const Shape& s, double* fan_in, double* fan_out) {
  int64_t receptive = 1;
  for (std::size_t i = 2; i < s.size(); ++i) receptive *= s[i];
  *fan_in = static_cast<double>(s[1] * receptive);
  *fan_out = static_cast<double>(s[0] * receptive);
}

Tensor xavier_uniform(TorchGenerator& gen, Shape shape) {
  double fan_in, fan_out;
  fans(shape, &fan_in, &fan_out);
  const double std = 1.0 * std::sqrt(2.0 / (fan_in + fan_out));
  return uniform_tensor(gen, std::move(shape), std::sqrt(3.0) * std);
}

Tensor xavier_normal(TorchGenerator& gen, Shape shape) {
  double fan_in, fan_out;
  fans(shape, &fan_in, &fan_out);
  const double std = 1.0 * std::sqrt(2.0 / (fan_in + fan_out));
  Tensor t(DType::F32, std::move(shape));
  gen.normal_(t.data<float>(), t.numel(), 0.0, std);
  return t;
}

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

NamedTensors init_linear(TorchGenerator& gen, int64_t in, int64_t out, bool bias, const std::string& prefix) {
  check_dim(in, "in_features");
  check_dim(out, "out_features");
  NamedTensors r;
  // kaiming_uniform_ returns early on a zero-element weight, drawing nothing.
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));  // Python's a ** 2 is this product
  const double w_bound = in > 0 ? std::sqrt(3.0) * (gain / std::sqrt(static_cast<double>(in))) : 0.0;
  Tensor w(DType::F32, {out, in});
  if (w.numel() > 0) gen.uniform_(w.data<float>(), w.numel(), -w_bound, w_bound);
  r.emplace_back(prefix + "weight", std::move(w));
  if (bias) {
    const double b_bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
    r.emplace_back(prefix + "bias", uniform_tensor(gen, {out}, b_bound));
  }
  return r;
}

NamedTensors init_causal_attention(TorchGenerator& gen, int64_t d_in, int64_t d_out, bool qkv_bias) {
  NamedTensors r;
  for (const char* name : {"W_query.", "W_key.", "W_value."})
    append(r, init_linear(gen, d_in, d_out, qkv_bias, name));
  return r;
}

NamedTensors init_mha_wrapper(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                              bool qkv_bias) {
  check_dim(num_heads, "num_heads");
  NamedTensors r;
  for (int64_t i = 0; i < num_heads; ++i)
    append(r, init_causal_attention(gen, d_in, d_out, qkv_bias), "heads." + std::to_string(i) + ".");
  return r;
}

NamedTensors init_book_mha(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                           bool qkv_bias) {
  check_dim(num_heads, "num_heads");
  NamedTensors r = init_causal_attention(gen, d_in, d_out, qkv_bias);
  append(r, init_linear(gen, d_out, d_out, true, "out_proj."));
  return r;
}

NamedTensors init_mha_001(TorchGenerator& gen, int64_t d_model, int64_t n_head) {
  check_dim(d_model, "d_model");
  check_heads(d_model, n_head, "d_model");
  NamedTensors r;
  for (const char* name : {"Q.", "K.", "V.", "O."}) append(r, init_linear(gen, d_model, d_model, true, name));
  return r;
}

NamedTensors init_mha_v2_001(TorchGenerator& gen, int64_t d_model, int64_t n_head) {
  check_dim(d_model, "d_model");
  check_heads(d_model, n_head, "d_model");
  NamedTensors r = init_linear(gen, d_model, 3 * d_model, true, "qkv_linear.");
  append(r, init_linear(gen, d_model, d_model, true, "O."));
  return r;
}

NamedTensors init_torch_mha(TorchGenerator& gen, const TorchMhaParams& p) {
  const int64_t e = p.embed_dim;
  const int64_t kdim = p.kdim < 0 ? e : p.kdim, vdim = p.vdim < 0 ? e : p.vdim;
  check_dim(e, "embed_dim");
  check_heads(e, p.num_heads, "embed_dim");
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
  append(r, std::move(out_proj));
  return r;
}

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
  check_dim(hidden_size, "hidden_size");
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

}  // namespace mha
