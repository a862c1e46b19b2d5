#pragma once
// .npy encoding and decoding over in-memory bytes, shared by the .npy file
// functions and the .npz members.
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mha::io::detail {

// Largest header accepted. numpy itself refuses headers over 10,000 bytes
// by default; this leaves room for many-dimensional shapes and stays small.
constexpr std::size_t kMaxNpyHeader = 1 << 20;
// Magic, version and header length before the header (10 or 12 bytes).
constexpr std::size_t kNpyPreambleMax = 12;

// What a .npy preamble and header say: enough to know the image's size
// before its data is at hand.
struct NpyLayout {
  DType dtype = DType::F32;
  bool swap = false;  // stored big-endian
  bool fortran_order = false;
  Shape shape;
  std::size_t data_offset = 0;  // preamble + header
  uint64_t nbytes = 0;          // data bytes the shape needs
};

// Parses the preamble and header at the start of `bytes` (the data need not
// follow); InputError for a bad magic, version, header or dtype, or a size
// that overflows. data_offset + nbytes fits in 63 bits.
NpyLayout read_npy_layout(std::string_view bytes, const std::string& where);

// Decodes a whole .npy image; `where` names the file (and member) in errors.
Tensor decode_npy(std::string_view bytes, const std::string& where);

// Version 1.0 (2.0 when the header needs it), little-endian, C order.
// bfloat16 has no numpy dtype, so it is widened to float32, which holds every
// bfloat16 value exactly; the file then reads back as float32.
std::string encode_npy(const Tensor& t);
// The preamble and header encode_npy writes before the data of a tensor of
// this dtype and shape (bfloat16 as float32).
std::string encode_npy_header(DType dtype, const Shape& shape);

}  // namespace mha::io::detail
