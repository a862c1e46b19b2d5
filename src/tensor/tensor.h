#pragma once
// Tensor: an element type, a shape and contiguous row-major (C order) bytes.
//
// It is the one currency between file formats, configs, variants and
// backends. It behaves as a value, but copies share their bytes until one
// of them asks for writable access (copy on write): self-attention passes
// the same input as query, key and value without tripling memory, and a
// backend can see that by comparing raw() pointers.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dtype.h"

namespace mha {

using Shape = std::vector<int64_t>;

// Number of elements; throws InputError if a dim is negative or the product
// overflows int64 (shapes come from untrusted files).
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 6, 3)"

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled

  static Tensor from_f32(Shape shape, std::vector<float> values);
  // A read-only view of `bytes` (numel * dtype size of them), not a copy:
  // an op's host input read in place from the caller's array (a KV cache
  // copied would cost as much as the op's own work). The caller keeps the
  // bytes alive and unchanged while this tensor or a copy of it lives;
  // writable access copies them first, as it does shared bytes.
  static Tensor borrow(DType dtype, Shape shape, const void* bytes);
  static Tensor from_f64(Shape shape, const std::vector<double>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return view_ ? view_bytes_ : bytes_->size(); }

  // Writable access first gives this tensor its own bytes if they are shared.
  uint8_t* raw() {
    detach();
    return bytes_->data();
  }
  const uint8_t* raw() const { return view_ ? view_ : bytes_->data(); }
  // Typed views; throw std::logic_error when T does not match dtype().
  template <class T> T* data();
  template <class T> const T* data() const;

  // Element i (row-major) converted to double / every element converted.
  double get_f64(int64_t i) const;
  std::vector<double> to_f64() const;
  std::vector<float> to_f32() const;
  Tensor cast(DType to) const;
  // Same bytes, new shape of the same element count.
  Tensor reshaped(Shape shape) const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t numel_ = 0;
  void detach();
  template <class T> void check_type() const;
  std::shared_ptr<std::vector<uint8_t>> bytes_ = std::make_shared<std::vector<uint8_t>>();
  const uint8_t* view_ = nullptr;  // borrowed bytes (borrow()), in place of bytes_
  std::size_t view_bytes_ = 0;
};

}  // namespace mha

namespace mha {
// Tensors by name, in file / construction order (state_dict order).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
}  // namespace mha
