#pragma once
// Comparison of a reference tensor with an output tensor: the metrics and
// checks behind `mha compare` (and the comparison `mha run` reports against a
// reference). docs/COMPARE.md explains each metric and its edge cases.
//
// All arithmetic is done in double on the values as compared (after the
// optional cast to `as_dtype`), so the numbers do not depend on the storage
// dtype's own rounding. Tensors are read element by element, never copied,
// so comparing a large output costs no extra memory.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mha::compare {

// torch.testing.assert_close's default tolerances for a dtype.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
Tolerance default_tolerance(DType t);

struct Options {
  // Cast both tensors to this dtype (float16, bfloat16, float32) first.
  std::optional<DType> as_dtype;
  // Unset atol/rtol take default_tolerance(compared dtype). The others add a
  // check only when set.
  std::optional<double> atol, rtol, pcc, max_abs, mean_abs, ulp;
  bool equal_nan = false;  // torch's default: NaN never matches, not even NaN
  // As torch.testing.assert_close's check_dtype: differing dtypes fail a
  // "dtype" check (unless as_dtype casts both). `mha compare` sets it.
  bool check_dtype = false;
  int top_k = 5;           // how many of the worst mismatches to keep
  // Names used in error messages and reports (file specs in the CLI).
  std::string ref_name = "REF", out_name = "OUT";
};

// A position in the tensor with the values found there.
struct Position {
  int64_t flat = 0;
  std::vector<int64_t> index;  // row-major multi-dimensional index
  double ref = 0, out = 0;     // as compared (after the cast)
  double value = 0;            // the metric at this position
  double allowed = 0;          // allclose: atol + rtol*|ref|
};

struct Side {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  int64_t nan = 0, pos_inf = 0, neg_inf = 0;
};

struct Check {
  std::string name;  // dtype, allclose, pcc, max-abs, mean-abs, ulp
  bool passed = true;
  double value = 0;      // what was measured
  double threshold = 0;  // what it was checked against
  // dtype: the two dtypes (value and threshold unused).
  DType out_dtype = DType::F32, ref_dtype = DType::F32;
};

struct Report {
  Side ref, out;
  DType compared_dtype = DType::F32;
  bool cast = false;
  int64_t numel = 0;
  int64_t finite_pairs = 0;          // positions where both values are finite
  int64_t nonfinite_mismatches = 0;  // NaN vs non-NaN, Inf vs other value
  // Over finite pairs; unset when there are none.
  std::optional<Position> max_abs_diff;
  std::optional<double> mean_abs_diff;
  std::optional<Position> max_rel_diff;
  double pcc = 1.0;
  std::optional<Position> max_ulp;  // unset for zero-size tensors
  Tolerance tolerance;
  bool equal_nan = false;
  int64_t mismatches = 0;
  double mismatch_percent = 0;
  std::vector<Position> worst;  // value: |out - ref| (Inf for NaN), worst first
  std::vector<Check> checks;
  bool passed = true;
};

// Throws InputError when the shapes differ or the options are invalid.
Report compare(const Tensor& ref, const Tensor& out, const Options& options);

}  // namespace mha::compare
