#pragma once
// Element types mha reads, writes and computes with. Names follow numpy.
#include <cstddef>
#include <cstdint>
#include <string>

namespace mha {

enum class DType { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64 };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);  // numpy-style: "float32", "bfloat16", "bool", ...
bool dtype_is_float(DType t);

}  // namespace mha
