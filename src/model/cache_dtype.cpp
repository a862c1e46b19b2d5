#include "model/cache_dtype.h"

namespace mha {

const char* cache_dtype_name(CacheDtype d) {
  switch (d) {
    case CacheDtype::Float32: return "float32";
    case CacheDtype::Float16: return "float16";
    case CacheDtype::Bfloat16: return "bfloat16";
    case CacheDtype::Q8_0: return "q8_0";
    case CacheDtype::Q4_0: return "q4_0";
    case CacheDtype::Bfloat8_b: return "bfloat8_b";
    case CacheDtype::Bfloat4_b: return "bfloat4_b";
  }
  return "?";
}

std::optional<CacheDtype> cache_dtype_from_name(const std::string& name) {
  for (CacheDtype d : kAllCacheDtypes)
    if (name == cache_dtype_name(d)) return d;
  return std::nullopt;
}

std::string cache_dtype_names() {
  std::string s;
  for (CacheDtype d : kAllCacheDtypes) s += (s.empty() ? "" : ", ") + std::string(cache_dtype_name(d));
  return s;
}

int64_t cache_dtype_block(CacheDtype d) {
  switch (d) {
    case CacheDtype::Q8_0:
    case CacheDtype::Q4_0: return 32;
    case CacheDtype::Bfloat8_b:
    case CacheDtype::Bfloat4_b: return 16;
    default: return 1;
  }
}

}  // namespace mha
