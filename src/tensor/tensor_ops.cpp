#include "tensor/tensor_ops.h"

#include <cstring>
#include <stdexcept>

namespace mha {

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::F32 ? t : t.cast(DType::F32); }

Tensor as_working_float(const Tensor& t) { return t.dtype() == DType::F64 ? t : as_f32(t); }

static int64_t row_size(const Tensor& t) { return t.ndim() == 0 ? 1 : t.numel() / std::max<int64_t>(t.dim(0), 1); }

Tensor transpose2d(const Tensor& t) {
  Tensor s = as_working_float(t);
  int64_t r = s.dim(0), c = s.dim(1);
  Tensor o(s.dtype(), {c, r});
  const std::size_t es = dtype_size(s.dtype());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(o.raw() + (j * r + i) * es, s.raw() + (i * c + j) * es, es);
  return o;
}

Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Tensor s = as_working_float(t);
  int64_t rs = row_size(s);
  Shape shape = s.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor o(s.dtype(), shape);
  const std::size_t es = dtype_size(s.dtype());
  for (std::size_t i = 0; i < rows.size(); ++i) std::memcpy(o.raw() + i * rs * es, s.raw() + rows[i] * rs * es, rs * es);
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
  // float64 when any part is (the others widen exactly), else float32.
  bool f64 = false;
  for (const Tensor& p : parts) f64 = f64 || p.dtype() == DType::F64;
  Tensor o(f64 ? DType::F64 : DType::F32, shape);
  uint8_t* dst = o.raw();
  for (const Tensor& p : parts) {
    Tensor f = f64 ? (p.dtype() == DType::F64 ? p : p.cast(DType::F64)) : as_f32(p);
    std::memcpy(dst, f.raw(), f.nbytes());
    dst += f.nbytes();
  }
  return o;
}

}  // namespace mha
