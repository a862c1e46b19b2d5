#pragma once
// Helpers for the io tests: deterministic tensors of every dtype and raw
// byte access, so files can be compared bit for bit with what numpy sees.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tensor/half.h"
#include "tensor/tensor.h"
#include "util/error.h"

namespace mha::test {

inline std::vector<DType> all_dtypes() {
  return {DType::Bool, DType::I8,  DType::I16,  DType::I32, DType::I64, DType::U8,  DType::U16,
          DType::U32,  DType::U64, DType::F16, DType::BF16, DType::F32, DType::F64};
}

// Bytes that exercise the dtype: random integers over the full range, and
// for floats a mix of ordinary values with -0, NaN, +-Inf and subnormals.
inline Tensor pattern_tensor(DType dt, Shape shape, uint32_t seed) {
  Tensor t(dt, std::move(shape));
  uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
  auto next = [&s]() {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return s;
  };
  const double specials[] = {-0.0, NAN, INFINITY, -INFINITY, 1e-40, 6e-8, 65504.0, -2.5};
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint8_t* p = t.raw() + i * dtype_size(dt);
    uint64_t r = next();
    double v = (static_cast<double>(r % 2000001) - 1000000.0) / 1000.0;
    if (r % 7 == 0) v = specials[(r >> 8) % 8];
    switch (dt) {
      case DType::Bool: *p = r & 1; break;
      case DType::F16: { uint16_t h = f16_from_f32(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::BF16: { uint16_t h = bf16_from_f32(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::F32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::F64: std::memcpy(p, &v, 8); break;
      default: std::memcpy(p, &r, dtype_size(dt)); break;
    }
  }
  return t;
}

inline std::string raw_bytes(const Tensor& t) { return std::string(reinterpret_cast<const char*>(t.raw()), t.nbytes()); }

// A .npy file: magic, version `major`, header length, then dict and data.
inline std::string npy(const std::string& dict, const std::string& data = "", int major = 1) {
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  const uint32_t n = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) s += static_cast<char>((n >> (8 * i)) & 0xffu);  // little endian
  return s + dict + data;
}

// The message of the InputError f throws, or "(no InputError)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Python literal for a C++ string path (tests keep paths free of quotes).
inline std::string py_str(const std::string& s) { return "r'" + s + "'"; }

}  // namespace mha::test
