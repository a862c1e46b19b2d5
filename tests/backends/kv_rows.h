#pragma once
// Float rows encoded into a cache format's rows, stored back to back as the
// caches and the decode kernel hold them (kv_format.h's counterpart of
// kv_rows_to_f32 for the tests that build caches by hand).
#include <cstdint>
#include <vector>

#include "backends/cpu/kv_format.h"

namespace mha::test {

// x [n, d] -> n rows of kv_row_bytes(dt, d) bytes.
inline std::vector<unsigned char> encode_rows(CacheDtype dt, const std::vector<float>& x, int64_t n, int64_t d) {
  const int64_t rb = kv_row_bytes(dt, d);
  std::vector<unsigned char> out(n * rb);
  for (int64_t r = 0; r < n; ++r) kv_encode_row(dt, x.data() + r * d, d, out.data() + r * rb);
  return out;
}

}  // namespace mha::test
