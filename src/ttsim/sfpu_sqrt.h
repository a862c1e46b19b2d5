#pragma once
// sqrt_tile on the SFPU, as tt-llk's Wormhole ckernel_sfpu_sqrt.h had it
// (read at tt-llk 07e5e9305ed9fe9334d0d534440e40d08c7fbd57; tt-metal's
// llk_api wrapper runs it with 2 reciprocal-root iterations):
//   approx mode: the exponent halved by integer arithmetic,
//                bits((bits(x) + 0x3f800000) >> 1);
//   exact mode:  r = bits 0x5f370000 - (bits(x) >> 1) (the reciprocal-root
//                seed), then twice r = ((r * r) * (x * -0.5) + 1.5) * r,
//                and sqrt(x) = r * x; a zero lane is left as it is.
// Every multiply and add is the SFPU's multiply-add (sfpu_mad.h). Later
// tt-llk revisions replaced this algorithm; docs/TTSIM.md names the one
// emulated and why.
#include "ttsim/arch.h"

namespace mha::ttsim {

// The lane's FP32 result before SFPSTORE.
float sfpu_sqrt_lane(float x, bool approx, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim
