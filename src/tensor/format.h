#pragma once
// Prints a tensor as PyTorch 1.13 prints it (torch/_tensor_str.py defaults:
// precision 4, summarised past 1000 elements with 3 edge items, line width
// 80), so that `mha run` output can be read side by side with a notebook.
#include <string>

#include "tensor/tensor.h"

namespace mha {

// "tensor([[0.3190, 0.4858], ...])"; a ", dtype=torch.float64" suffix for
// dtypes other than float32, as torch adds it.
std::string format_torch(const Tensor& t);

}  // namespace mha
