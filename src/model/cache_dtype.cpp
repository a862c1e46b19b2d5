#include "model/cache_dtype.h"

namespace mha {

const char* cache_dtype_name(CacheDtype d) {
  switch (d) {
    case CacheDtype::Float32: return "float32";
    case CacheDtype::Bfloat16: return "bfloat16";
  }
  return "?";
}

std::optional<CacheDtype> cache_dtype_from_name(const std::string& name) {
  for (CacheDtype d : {CacheDtype::Float32, CacheDtype::Bfloat16})
    if (name == cache_dtype_name(d)) return d;
  return std::nullopt;
}

}  // namespace mha
