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

// Decodes a whole .npy image; `where` names the file (and member) in errors.
Tensor decode_npy(std::string_view bytes, const std::string& where);

// Version 1.0 (2.0 when the header needs it), little-endian, C order.
// bfloat16 has no numpy dtype, so it is widened to float32, which holds every
// bfloat16 value exactly; the file then reads back as float32.
std::string encode_npy(const Tensor& t);

}  // namespace mha::io::detail
