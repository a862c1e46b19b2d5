#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "ttsim/matrix_unit.h"

using namespace mha;
using namespace mha::ttsim;

namespace {
// One MVMUL chain over the phases of a fidelity, for a single product a*b
// (a is the in0/SrcB value, b the in1/SrcA value).
float product(float a, float b, MathFidelity f, bool fp32) {
  float av[16] = {a}, bv[16] = {b};
  float dst = 0.0f;
  for (int p = 0; p < fidelity_phase_count(f); ++p) dst = fpu_dot16(av, bv, dst, p, fp32);
  return dst;
}
const float kAll7 = 1.9921875f;  // bf16 1.1111111b: every mantissa bit set
}  // namespace

TEST(TtsimMatrixUnit, FidelityPhasesKeepTheDocumentedBits) {
  // LoFi: SrcB keeps hidden+6 bits (1.984375), SrcA hidden+4 (1.9375).
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::LoFi, true), 1.984375f * 1.9375f);
  // HiFi2 adds SrcA's last 3 bits: SrcB still loses its last bit.
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::HiFi2, true), 1.984375f * kAll7);
  // HiFi3 adds SrcB's last bit times SrcA's high piece.
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::HiFi3, true), 1.984375f * kAll7 + (1.0f / 128) * 1.9375f);
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::HiFi4, true), kAll7 * kAll7);
  // The roles are not symmetric: a value with only its last bit set loses it
  // in SrcB under LoFi/HiFi2 but survives HiFi2 in SrcA.
  const float last = 1.0f + 1.0f / 128;
  EXPECT_EQ(product(last, 1.0f, MathFidelity::HiFi2, true), 1.0f);
  EXPECT_EQ(product(1.0f, last, MathFidelity::HiFi2, true), last);
  EXPECT_EQ(product(1.0f, last, MathFidelity::LoFi, true), 1.0f);
}

TEST(TtsimMatrixUnit, Bf16DstRoundsEveryPhase) {
  // LoFi: 3.8447265625 -> bf16 (half away) 3.84375.
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::LoFi, false), 3.84375f);
  // HiFi2: 3.84375 + 0.1085205078125 (term pre-rounded to 11 bits: 0.109375) = 3.953125.
  EXPECT_EQ(product(kAll7, kAll7, MathFidelity::HiFi2, false), 3.953125f);
}

TEST(TtsimMatrixUnit, Bf16DstReroundsEveryK16Step) {
  // K = 32 along one row: face 1 sums 256 + 1 = 257, which a bf16 Dst keeps
  // as 258 (half away); face 2 adds 1: 259 -> 260. FP32 Dst keeps 258.
  std::vector<float> a(32, 0.0f), b(32, 1.0f);
  a[0] = 256.0f, a[1] = 1.0f, a[16] = 1.0f;
  for (bool fp32 : {false, true}) {
    float dst = 0.0f;
    for (int f = 0; f < 2; ++f) dst = fpu_dot16(&a[16 * f], &b[16 * f], dst, 0, fp32);
    EXPECT_EQ(dst, fp32 ? 258.0f : 260.0f);
  }
}

TEST(TtsimMatrixUnit, ProductsAlignWithinGroupsOfEight) {
  // 1*1 + (1.5*2^-11)*1: in the same group of 8 the small product is rounded
  // to the big one's 12-bit grid (2^-10); in the other group it stays exact.
  float a[16] = {}, b[16];
  for (float& x : b) x = 1.0f;
  a[0] = 1.0f;
  a[1] = 1.5f * std::ldexp(1.0f, -11);
  EXPECT_EQ(fpu_dot16(a, b, 0.0f, 0, true), 1.0f + std::ldexp(1.0f, -10));
  a[1] = 0.0f;
  a[8] = 1.5f * std::ldexp(1.0f, -11);
  EXPECT_EQ(fpu_dot16(a, b, 0.0f, 0, true), 1.0f + 1.5f * std::ldexp(1.0f, -11));
}

TEST(TtsimMatrixUnit, SignsCancelAndDstAccumulates) {
  float a[16] = {3.0f, -3.0f}, b[16] = {2.0f, 2.0f};
  EXPECT_EQ(f32_bits(fpu_dot16(a, b, 0.0f, 0, true)), 0u);
  EXPECT_EQ(fpu_dot16(a, b, -1.5f, 0, true), -1.5f);
  float c[16] = {-0.5f}, d[16] = {4.0f};
  EXPECT_EQ(fpu_dot16(c, d, 1.0f, 0, false), -1.0f);
}

TEST(TtsimMatrixUnit, ElementwiseOps) {
  EXPECT_EQ(fpu_mul(kAll7, kAll7, MathFidelity::HiFi4, true), kAll7 * kAll7);
  EXPECT_EQ(fpu_mul(1.5f, -2.0f, MathFidelity::LoFi, false), -3.0f);
  EXPECT_EQ(fpu_add(1.0f, 2.0f, false), 3.0f);
  EXPECT_EQ(fpu_add(1.0f, -1.0f, false), 0.0f);
  EXPECT_EQ(fpu_add(256.0f, 1.0f, false), 258.0f);  // 257 -> bf16 half away
}

TEST(TtsimMatrixUnit, MatmulSmallIntegersIsExactWithPaddingAndBroadcast) {
  // a: (2, 3, 5), b: (5, 2) shared by both batches.
  std::vector<float> av(30), bv(10);
  for (int i = 0; i < 30; ++i) av[i] = static_cast<float>(i % 7) - 3;
  for (int i = 0; i < 10; ++i) bv[i] = static_cast<float>(i % 5) - 2;
  TileTensor a = to_tile_layout(av.data(), {2, 3, 5}, DataFormat::Bfloat16);
  TileTensor b = to_tile_layout(bv.data(), {5, 2}, DataFormat::Bfloat16);
  for (simd::Isa isa : {simd::Isa::Scalar, simd::best_isa()})
    for (MathFidelity f : {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi4}) {
      ComputeConfig cfg;
      cfg.math_fidelity = f;
      TileTensor out;
      tt_matmul(a, b, out, cfg, Exec{isa, nullptr});
      ASSERT_EQ(out.shape, (Shape{2, 3, 2}));
      std::vector<float> got = to_row_major(out);
      for (int bt = 0; bt < 2; ++bt)
        for (int m = 0; m < 3; ++m)
          for (int n = 0; n < 2; ++n) {
            float ref = 0;
            for (int k = 0; k < 5; ++k) ref += av[(bt * 3 + m) * 5 + k] * bv[k * 2 + n];
            EXPECT_EQ(got[(bt * 3 + m) * 2 + n], ref);
          }
      for (int64_t r = 0; r < out.prows; ++r) {  // padding stays zero
        for (int64_t c = 0; c < out.pcols; ++c) {
          if (r >= 3 || c >= 2) {
            EXPECT_EQ(out.at(1, r, c), 0.0f);
          }
        }
      }
    }
}

TEST(TtsimMatrixUnit, Bfp8OutputSharesExponentPerFaceRow) {
  std::vector<float> av(32 * 32, 0.0f), bv(32 * 32, 0.0f);
  for (int i = 0; i < 32; ++i) bv[i * 32 + i] = 1.0f;  // identity
  av[0] = 64.0f, av[1] = 1.03125f, av[16] = 1.03125f;  // row 0: 1.03125 shares 64's exponent in face 0 only
  TileTensor a = to_tile_layout(av.data(), {32, 32}, DataFormat::Bfloat16);
  TileTensor b = to_tile_layout(bv.data(), {32, 32}, DataFormat::Bfloat16);
  ComputeConfig cfg;
  cfg.output = DataFormat::Bfp8_b;
  TileTensor out;
  tt_matmul(a, b, out, cfg);
  EXPECT_EQ(out.at(0, 0, 0), 64.0f);
  EXPECT_EQ(out.at(0, 0, 1), 1.0f);       // step 1.0 next to 64
  EXPECT_EQ(out.at(0, 0, 16), 1.03125f);  // its own face row keeps the bits
}

TEST(TtsimMatrixUnit, RejectsMismatchedShapes) {
  TileTensor a = make_tile_tensor({2, 3}, DataFormat::Bfloat16);
  TileTensor b = make_tile_tensor({4, 2}, DataFormat::Bfloat16);
  TileTensor out;
  EXPECT_ANY_THROW(tt_matmul(a, b, out, ComputeConfig{}));
}
