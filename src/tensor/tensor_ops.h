#pragma once
// Small tensor rearrangements: variants use them to map a module's weights
// onto the canonical projections, init to store ttnn weights (in x out).
// float64 stays float64 (the reference backend computes in it); every other
// dtype comes out float32.
#include <vector>

#include "tensor/tensor.h"

namespace mha {

Tensor transpose2d(const Tensor& t);                              // [r, c] -> [c, r]
Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows);  // [r, ...] -> [rows.size(), ...]
Tensor slice_rows(const Tensor& t, int64_t start, int64_t count);   // rows [start, start + count)
Tensor concat_rows(const std::vector<Tensor>& parts);             // along dim 0
Tensor as_f32(const Tensor& t);
// float64 as is, any other dtype as float32: the working dtype of a weight
// or input, which only a float64 file keeps wider than float32.
Tensor as_working_float(const Tensor& t);

}  // namespace mha
