#pragma once
// The .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace mha::io::detail {

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the dict; requires exactly the keys descr, fortran_order and shape,
// as numpy does. `where` names the file in errors.
NpyHeader parse_npy_header(std::string_view text, const std::string& where);

}  // namespace mha::io::detail
