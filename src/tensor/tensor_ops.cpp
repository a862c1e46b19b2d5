#include "tensor/tensor_ops.h"

#include <cstring>
#include <stdexcept>

namespace mha {

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::F32 ? t : t.cast(DType::F32); }

static int64_t row_size(const Tensor& t) { return t.ndim() == 0 ? 1 : t.numel() / std::max<int64_t>(t.dim(0), 1); }

Tensor transpose2d(const Tensor& t) {
  Tensor s = as_f32(t);
  int64_t r = s.dim(0), c = s.dim(1);
  Tensor o(DType::F32, {c, r});
  const float* a = s.data<float>();
  float* b = o.data<float>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) b[j * r + i] = a[i * c + j];
  return o;
}

Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Tensor s = as_f32(t);
  int64_t rs = row_size(s);
  Shape shape = s.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor o(DType::F32, shape);
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::memcpy(o.data<float>() + i * rs, s.data<float>() + rows[i] * rs, rs * sizeof(float));
  return o;
}

Tensor slice_rows(const Tensor& t, int64_t start, int64_t count) {
  std::vector<int64_t> rows(count);
  for (int64_t i = 0; i < count; ++i) rows[i] = start + i;
  return take_rows(t, rows);
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  if (parts.empty()) throw std::logic_error("concat_rows: nothing to concatenate");
  Shape shape = parts[0].shape();
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dim(0);
  shape[0] = total;
  Tensor o(DType::F32, shape);
  float* dst = o.data<float>();
  for (const Tensor& p : parts) {
    Tensor f = as_f32(p);
    std::memcpy(dst, f.data<float>(), f.nbytes());
    dst += f.numel();
  }
  return o;
}

}  // namespace mha
