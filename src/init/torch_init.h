#pragma once
// PyTorch 1.13's nn.init draws on x86-64, bit for bit, for the seed modules'
// `init: torch` weights (variants/module_init.h): nn.Linear's
// initialisation, xavier_uniform_ / xavier_normal_, and the size checks the
// modules make. Each draws from the generator it is given; tensors are
// float32. Bad sizes throw InputError.
#include <cstdint>
#include <string>

#include "init/torch_generator.h"
#include "tensor/tensor.h"

namespace mha {

// nn.Linear(in, out, bias): "<prefix>weight" (out, in), "<prefix>bias" (out).
// Weight: kaiming_uniform_(a=sqrt(5)), bound sqrt(3) * gain / sqrt(in) in
// double as Python computes it; no draws when the weight has no elements.
// Bias: uniform(-1/sqrt(in), 1/sqrt(in)), bound 0 when in == 0 (its draws
// are still consumed).
NamedTensors init_linear(TorchGenerator& gen, int64_t in, int64_t out, bool bias,
                         const std::string& prefix = "");

// nn.init.xavier_uniform_ / xavier_normal_ (gain 1) on a new tensor of
// `shape` (at least 2 dims: fan_in = size(1) * receptive field, fan_out =
// size(0) * receptive field).
Tensor xavier_uniform(TorchGenerator& gen, Shape shape);
Tensor xavier_normal(TorchGenerator& gen, Shape shape);

// `from` appended to `to`, each name prefixed: a submodule's state_dict.
void append_named(NamedTensors& to, NamedTensors from, const std::string& prefix = "");

// InputError "init: WHAT must be >= 0" for a negative size, and the
// modules' "WIDTH must be divisible by the number of heads" (heads > 0).
void check_init_size(int64_t v, const char* what);
void check_init_heads(int64_t width, int64_t heads, const char* width_name);

}  // namespace mha
