#pragma once
// exp2_lanes_bench's kernels: y[i] = 2^x[i] (x <= 0) over n floats (n a
// multiple of 16), by the project's lane types (src/vec/exp2.h) per level.
#include <cstdint>

namespace mha::bench {
void exp2_lanes_avx2(const float* x, float* y, int64_t n);
void exp2_lanes_avx512(const float* x, float* y, int64_t n);
}  // namespace mha::bench
