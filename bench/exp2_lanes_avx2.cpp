// exp2_lanes_bench: the softmax's exp2 on vec::F32x8 (built at the avx2 level).
#include "exp2_lanes.h"
#include "vec/lanes_avx2.h"

namespace mha::bench {
void exp2_lanes_avx2(const float* x, float* y, int64_t n) {
  using V = vec::F32x8;
  for (int64_t i = 0; i < n; i += V::W) V::store(y + i, V::exp2(V::load(x + i)));
}
}  // namespace mha::bench
