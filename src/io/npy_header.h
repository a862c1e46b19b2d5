#pragma once
// The .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mha::io::detail {

// numpy 2's NPY_MAXDIMS (numpy 1.x allowed 32): every array numpy can write
// has at most this many dimensions, so a header with more is not numpy's.
constexpr std::size_t kMaxNpyDims = 64;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the dict; requires exactly the keys descr, fortran_order and shape,
// as numpy does, each once, and at most kMaxNpyDims dimensions. `where` names the file in errors.
NpyHeader parse_npy_header(std::string_view text, const std::string& where);

}  // namespace mha::io::detail
