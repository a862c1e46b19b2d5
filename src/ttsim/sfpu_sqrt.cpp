// sqrt_tile's lane (sfpu_sqrt.h). Learned from tt-llk's ckernel_sfpu_sqrt.h;
// written independently.
#include "ttsim/sfpu_sqrt.h"

#include "tensor/half.h"
#include "ttsim/sfpu_mad.h"

namespace mha::ttsim {

float sfpu_sqrt_lane(float x, bool approx, Arch arch) {
  const uint32_t u = f32_bits(x);
  if (approx) return f32_from_bits((0x3f800000u + u) >> 1);  // vConstFloatPrgm0 = s2vFloat16b(127 << 7)
  if (x == 0.0f) return x;                                   // v_if (val != 0): the lane keeps its value
  float r = f32_from_bits(0x5f370000u - (u >> 1));           // vConstFloatPrgm0 = s2vFloat16b(0x5f37)
  const float half_x = sfpu_mul(x, -0.5f, arch);
  for (int i = 0; i < 2; ++i) r = sfpu_mul(sfpu_mad(sfpu_mul(r, r, arch), half_x, 1.5f, arch), r, arch);
  return sfpu_mul(r, x, arch);
}

}  // namespace mha::ttsim
