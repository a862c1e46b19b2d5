#include "tensor/tensor.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include "tensor/half.h"
#include "util/huge_pages.h"
#include "util/error.h"

namespace mha {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw InputError("negative dimension " + std::to_string(d) + " in shape " + shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw InputError("shape " + shape_str(shape) + " has more elements than fit in 64 bits");
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  std::size_t es = dtype_size(dtype_);
  if (numel_ > 0 && static_cast<uint64_t>(numel_) > std::numeric_limits<int64_t>::max() / es)
    throw InputError("tensor of shape " + shape_str(shape_) + " is too large");
  const std::size_t n = static_cast<std::size_t>(numel_) * es;
  bytes_->reserve(n);
  advise_huge_pages(bytes_->data(), n);
  bytes_->assign(n, 0);
}

Tensor Tensor::from_f32(Shape shape, std::vector<float> values) {
  Tensor t(DType::F32, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel_)
    throw std::logic_error("from_f32: value count does not match shape");
  if (!values.empty()) std::memcpy(t.bytes_->data(), values.data(), t.bytes_->size());
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, const void* bytes) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.view_ = static_cast<const uint8_t*>(bytes);
  t.view_bytes_ = static_cast<std::size_t>(t.numel_) * dtype_size(dtype);
  return t;
}

Tensor Tensor::from_f64(Shape shape, const std::vector<double>& values) {
  Tensor t(DType::F64, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel_)
    throw std::logic_error("from_f64: value count does not match shape");
  if (!values.empty()) std::memcpy(t.bytes_->data(), values.data(), t.bytes_->size());
  return t;
}

namespace {
template <class T> constexpr DType dtype_of();
// (bool tensors are built by the readers, not through a typed constructor)
template <> constexpr DType dtype_of<int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::I16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::U16; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::U32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::U64; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }

template <class T> T load(const uint8_t* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }
}  // namespace

void Tensor::detach() {
  if (view_) {
    bytes_ = std::make_shared<std::vector<uint8_t>>(view_, view_ + view_bytes_);
    view_ = nullptr;
  } else if (bytes_.use_count() > 1) {
    bytes_ = std::make_shared<std::vector<uint8_t>>(*bytes_);
  }
}

template <class T> void Tensor::check_type() const {
  // uint16_t also serves float16/bfloat16 bit patterns; uint8_t serves bool bytes.
  bool ok = dtype_ == dtype_of<T>() ||
            (std::is_same<T, uint16_t>::value && (dtype_ == DType::F16 || dtype_ == DType::BF16)) ||
            (std::is_same<T, uint8_t>::value && dtype_ == DType::Bool);
  if (!ok) throw std::logic_error(std::string("Tensor::data: tensor is ") + dtype_name(dtype_));
}
template <class T> T* Tensor::data() {
  check_type<T>();
  detach();
  return reinterpret_cast<T*>(bytes_->data());
}
template <class T> const T* Tensor::data() const {
  check_type<T>();
  return reinterpret_cast<const T*>(raw());
}

#define MHA_INSTANTIATE(T) template T* Tensor::data<T>(); template const T* Tensor::data<T>() const;
MHA_INSTANTIATE(int8_t) MHA_INSTANTIATE(int16_t) MHA_INSTANTIATE(int32_t) MHA_INSTANTIATE(int64_t)
MHA_INSTANTIATE(uint8_t) MHA_INSTANTIATE(uint16_t) MHA_INSTANTIATE(uint32_t) MHA_INSTANTIATE(uint64_t)
MHA_INSTANTIATE(float) MHA_INSTANTIATE(double)
#undef MHA_INSTANTIATE

double Tensor::get_f64(int64_t i) const {
  const uint8_t* p = raw() + static_cast<std::size_t>(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::Bool: return *p ? 1.0 : 0.0;
    case DType::I8: return load<int8_t>(p);
    case DType::I16: return load<int16_t>(p);
    case DType::I32: return load<int32_t>(p);
    case DType::I64: return static_cast<double>(load<int64_t>(p));
    case DType::U8: return load<uint8_t>(p);
    case DType::U16: return load<uint16_t>(p);
    case DType::U32: return load<uint32_t>(p);
    case DType::U64: return static_cast<double>(load<uint64_t>(p));
    case DType::F16: return f32_from_f16(load<uint16_t>(p));
    case DType::BF16: return f32_from_bf16(load<uint16_t>(p));
    case DType::F32: return load<float>(p);
    case DType::F64: return load<double>(p);
  }
  return 0.0;
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> out(static_cast<std::size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[i] = get_f64(i);
  return out;
}

std::vector<float> Tensor::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(numel_));
  if (dtype_ == DType::F32) {
    if (numel_) std::memcpy(out.data(), raw(), nbytes());
    return out;
  }
  for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<float>(get_f64(i));
  return out;
}

Tensor Tensor::cast(DType to) const {
  if (to == dtype_) return *this;
  Tensor t(to, shape_);
  uint8_t* q = t.bytes_->data();
  for (int64_t i = 0; i < numel_; ++i) {
    double v = get_f64(i);
    uint8_t* p = q + static_cast<std::size_t>(i) * dtype_size(to);
    auto store = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (to) {
      case DType::Bool: *p = v != 0.0; break;
      case DType::I8: store(static_cast<int8_t>(v)); break;
      case DType::I16: store(static_cast<int16_t>(v)); break;
      case DType::I32: store(static_cast<int32_t>(v)); break;
      case DType::I64: store(static_cast<int64_t>(v)); break;
      case DType::U8: store(static_cast<uint8_t>(v)); break;
      case DType::U16: store(static_cast<uint16_t>(v)); break;
      case DType::U32: store(static_cast<uint32_t>(v)); break;
      case DType::U64: store(static_cast<uint64_t>(v)); break;
      // Through float first, as torch's .to(half/bfloat16) does from float32.
      case DType::F16: store(f16_from_f32(static_cast<float>(v))); break;
      case DType::BF16: store(bf16_from_f32(static_cast<float>(v))); break;
      case DType::F32: store(static_cast<float>(v)); break;
      case DType::F64: store(v); break;
    }
  }
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel_)
    throw InputError("cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

}  // namespace mha
