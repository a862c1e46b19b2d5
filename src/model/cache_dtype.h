#pragma once
// The element type a KV cache stores K and V in (backends/decode.h), an axis
// of the config ("decode.cache_dtype"), of `mha bench --kv-cache` and of the
// backends' decode sessions alike. Bfloat16 halves the bytes a decode step
// reads; values are rounded to nearest even when appended and widened when
// attended.
#include <optional>
#include <string>

namespace mha {

enum class CacheDtype { Float32, Bfloat16 };
const char* cache_dtype_name(CacheDtype d);  // "float32", "bfloat16"
// The dtype named so, or nullopt (the caller says where it was found).
std::optional<CacheDtype> cache_dtype_from_name(const std::string& name);

}  // namespace mha
