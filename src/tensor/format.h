#pragma once
// Prints a tensor as PyTorch 1.13 prints it (torch/_tensor_str.py defaults:
// precision 4, summarised past 1000 elements with 3 edge items, line width
// 80), so that `mha run` output can be read side by side with a notebook.
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mha {

// "tensor([[0.3190, 0.4858], ...])"; a ", dtype=torch.float64" suffix for
// dtypes other than float32, as torch adds it.
std::string format_torch(const Tensor& t);

// format_torch of a tensor [B, L, ...] of `shape` of which only some rows of
// dim 1 are held: `rows` [B, rows_index.size(), ...] holds rows rows_index
// (increasing). The print is the same as the whole tensor's as long as every
// row it shows is held: every row when L <= 6 or the tensor has at most 1000
// elements, else rows 0-2 and L-3..L-1 (torch's 3 edge items); an element of
// a row not held is a std::logic_error.
std::string format_torch_rows(const Tensor& rows, const std::vector<int64_t>& rows_index, const Shape& shape);

}  // namespace mha
