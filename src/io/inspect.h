#pragma once
// Per-tensor statistics for `mha inspect`, kept in the library so tests can
// check them without parsing CLI output.
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mha::io {

struct TensorStats {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  int64_t numel = 0;
  int64_t finite = 0;  // min, max and mean cover only these; meaningless when 0
  double min = 0, max = 0, mean = 0;
  int64_t nan_count = 0, inf_count = 0;
};

TensorStats tensor_stats(const std::string& name, const Tensor& t);
// Statistics of every tensor read_all finds at `path`, or of the one tensor
// a FILE:NAME spec names.
std::vector<TensorStats> inspect_path(const std::string& path);

// One row per tensor under a header line; "-" where there are no finite values.
std::string format_stats_table(const std::vector<TensorStats>& stats);
// {"file": PATH, "tensors": [{"name", "dtype", "shape", "numel", "min", "max",
// "mean", "nan_count", "inf_count"}]}, with null min/max/mean where there are
// no finite values.
std::string format_stats_json(const std::string& path, const std::vector<TensorStats>& stats);

}  // namespace mha::io
