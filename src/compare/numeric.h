#pragma once
// Numeric building blocks of the comparison: rounding to a dtype, ULP
// distance, compensated sums, tt-metal's PCC and multi-dimensional indices.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace mha::compare {

// v rounded to dtype t as Tensor::cast would store it (through float for
// float16/bfloat16, as torch does), returned as double. Integer and float64
// dtypes return v unchanged.
double round_to(DType t, double v);

// Distance between a and b (both representable in t) counted in steps of t:
// for floats the number of representable values between them (+0 and -0
// are the same point; +-Inf sit one step past the largest finite value);
// for integers and bool |a - b|. Both NaN: 0; one NaN: Inf.
double ulp_distance(DType t, double a, double b);

// Row-major multi-dimensional index of a flat position.
std::vector<int64_t> unravel(int64_t flat, const Shape& shape);

// Neumaier's compensated sum: keeps means and correlations of millions of
// elements accurate to a few ulps of double, close to numpy's pairwise sum.
class Sum {
 public:
  void add(double x) {
    double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double value() const { return sum_ + comp_; }

 private:
  double sum_ = 0, comp_ = 0;
};

// PCC as tt-metal's comp_pcc(golden=ref, calculated=out) reports it
// (get_pcc in ttnn/tt_lib/_internal/comparison_funcs.py, which the sweep
// tests' comparison_funcs.py is; revision in docs/COMPARE.md):
//  both all NaN -> 1; one all NaN -> 0; exactly one side all zero -> 0
//  (NaN and Inf count as non-zero); then NaN and +-Inf become 0; equal -> 1;
//  a single element (not equal) -> 0; both sides constant -> 1 if the two
//  constants are close (torch.isclose: |ref - out| <= 1e-8 + 1e-5 |out|)
//  else 0; one side constant -> 1 (numpy masks the 0/0 correlation and
//  comp_pcc takes the minimum of what is left); else Pearson's r.
// ref(i) and out(i) give the values as compared, for i in [0, n).
template <class RefAt, class OutAt>
double pcc_tt(int64_t n, const RefAt& ref, const OutAt& out) {
  auto masked = [](double v) { return std::isfinite(v) ? v : 0.0; };
  bool ref_all_nan = true, out_all_nan = true, ref_nonzero = false, out_nonzero = false, equal = true;
  double ref_min = INFINITY, ref_max = -INFINITY, out_min = INFINITY, out_max = -INFINITY;
  Sum ref_sum, out_sum;
  for (int64_t i = 0; i < n; ++i) {
    double r = ref(i), o = out(i);
    ref_all_nan = ref_all_nan && std::isnan(r);
    out_all_nan = out_all_nan && std::isnan(o);
    ref_nonzero = ref_nonzero || r != 0;  // true for NaN, as torch's bool() is
    out_nonzero = out_nonzero || o != 0;
    double mr = masked(r), mo = masked(o);
    equal = equal && mr == mo;
    ref_min = std::min(ref_min, mr), ref_max = std::max(ref_max, mr);
    out_min = std::min(out_min, mo), out_max = std::max(out_max, mo);
    ref_sum.add(mr);
    out_sum.add(mo);
  }
  if (ref_all_nan && out_all_nan) return 1.0;  // also the zero-size case
  if (ref_all_nan || out_all_nan) return 0.0;
  if (ref_nonzero != out_nonzero) return 0.0;
  if (equal) return 1.0;
  if (n == 1) return 0.0;
  if (ref_min == ref_max && out_min == out_max)
    return std::fabs(ref_max - out_max) <= 1e-8 + 1e-5 * std::fabs(out_max) ? 1.0 : 0.0;
  if (ref_min == ref_max || out_min == out_max) return 1.0;
  double ref_mean = ref_sum.value() / n, out_mean = out_sum.value() / n;
  Sum sxx, syy, sxy;
  for (int64_t i = 0; i < n; ++i) {
    double dr = masked(ref(i)) - ref_mean, dout = masked(out(i)) - out_mean;
    sxx.add(dr * dr);
    syy.add(dout * dout);
    sxy.add(dr * dout);
  }
  double r = sxy.value() / (std::sqrt(sxx.value()) * std::sqrt(syy.value()));
  if (std::isnan(r)) return 1.0;  // variances that underflow to 0: masked too
  return std::clamp(r, -1.0, 1.0);
}

}  // namespace mha::compare
