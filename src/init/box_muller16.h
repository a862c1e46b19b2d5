#pragma once
// The float32 Box-Muller step of torch 1.13's AVX2 normal_ kernel.
#include <cstdint>

namespace mha::detail {

// Turns 16 uniforms in [0, 1) into 16 normals in place: values 0..7 give the
// radii (through log(1 - u)), values 8..15 the angles; slot j gets the cosine
// sample and slot j + 8 the sine sample, each as fmaf(n, std, mean).
//
// torch computes log, sin and cos with avx_mathfun.h's Cephes polynomials,
// not libm, and GCC contracted their multiply-adds into FMAs when Debian
// built it; the lane functions here repeat that exact sequence of float
// roundings (one std::fmaf per contracted pair), so results match bit for bit.
void box_muller16(float* data, float mean, float std);

}  // namespace mha::detail
