#pragma once
// The element type a KV cache stores K and V in (backends/decode.h), an axis
// of the config ("decode.cache_dtype"), of `mha bench --kv-cache` and of the
// backends' decode sessions alike. Values are rounded into the format when
// appended and decoded when attended (backends/cpu/kv_format.h has the byte
// layouts; docs/CONFIG.md the sizes and error bounds):
//   float32, float16, bfloat16  one element each (16-bit: round to nearest even)
//   q8_0, q4_0                  ggml's blocks of 32 with an fp16 scale
//   bfloat8_b, bfloat4_b        Tenstorrent block float: 16-element rows
//                               sharing one exponent (tt-sim's host encoder)
#include <cstdint>
#include <optional>
#include <string>

namespace mha {

enum class CacheDtype { Float32, Float16, Bfloat16, Q8_0, Q4_0, Bfloat8_b, Bfloat4_b };
constexpr CacheDtype kAllCacheDtypes[] = {CacheDtype::Float32, CacheDtype::Float16,   CacheDtype::Bfloat16,
                                          CacheDtype::Q8_0,    CacheDtype::Q4_0,      CacheDtype::Bfloat8_b,
                                          CacheDtype::Bfloat4_b};
const char* cache_dtype_name(CacheDtype d);  // "float32", "q8_0", "bfloat8_b", ...
// The dtype named so, or nullopt (the caller says where it was found).
std::optional<CacheDtype> cache_dtype_from_name(const std::string& name);
// Every valid name, comma-separated, for error messages.
std::string cache_dtype_names();
// Elements that share a scale or exponent (1, 32 for q8_0/q4_0, 16 for the
// block floats): a head width must be a multiple of it.
int64_t cache_dtype_block(CacheDtype d);

}  // namespace mha
