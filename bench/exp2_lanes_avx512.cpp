// exp2_lanes_bench: the softmax's exp2 on vec::F32x16 (built at the avx512 level).
#include "exp2_lanes.h"
// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports once they are inlined into a loop this
// small (GCC PR 105593); the kernels that use the same lanes inline them
// elsewhere and do not trip it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "vec/lanes_avx512.h"

namespace mha::bench {
void exp2_lanes_avx512(const float* x, float* y, int64_t n) {
  using V = vec::F32x16;
  for (int64_t i = 0; i < n; i += V::W) V::store(y + i, V::exp2(V::load(x + i)));
}
}  // namespace mha::bench
