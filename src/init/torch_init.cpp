#include "init/torch_init.h"

#include "tensor/tensor_ops.h"

#include <cmath>
#include <cstring>

#include "util/error.h"

namespace mha {

void check_init_size(int64_t v, const char* what) {
  if (v < 0) throw InputError(std::string("init: ") + what + " must be >= 0, found " + std::to_string(v));
}

void check_init_heads(int64_t width, int64_t heads, const char* width_name) {
  if (heads <= 0) throw InputError("init: num_heads must be > 0, found " + std::to_string(heads));
  if (width % heads != 0)
    throw InputError(std::string("init: ") + width_name + " (" + std::to_string(width) +
                     ") must be divisible by the number of heads (" + std::to_string(heads) + ")");
}

void append_named(NamedTensors& to, NamedTensors from, const std::string& prefix) {
  for (auto& [name, t] : from) to.emplace_back(prefix + name, std::move(t));
}

namespace {

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

}  // namespace

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

NamedTensors init_linear(TorchGenerator& gen, int64_t in, int64_t out, bool bias, const std::string& prefix) {
  check_init_size(in, "in_features");
  check_init_size(out, "out_features");
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

}  // namespace mha
