#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "tensor/half.h"
#include "ttsim/sfpu.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {
float bf16_ulp(float x) { return std::ldexp(1.0f, std::ilogb(x) - 7); }
}  // namespace

TEST(TtsimSfpu, AlgorithmFollowsFlags) {
  EXPECT_EQ(exp_algorithm(true, false), ExpAlgorithm::FastApprox);
  EXPECT_EQ(exp_algorithm(true, true), ExpAlgorithm::FastApprox);
  EXPECT_EQ(exp_algorithm(false, false), ExpAlgorithm::Accurate21f);
  EXPECT_EQ(exp_algorithm(false, true), ExpAlgorithm::AccurateFp32);
}

TEST(TtsimSfpu, FastApproxExpKnownValues) {
  // exp(0): 32500.818 rounds to 32501; 32501 << 15 = 0x3f7a8000; a bf16 Dst keeps 0x3f7a.
  EXPECT_EQ(f32_bits(sfpu_exp_lane(0.0f, ExpAlgorithm::FastApprox)), 0x3f7a8000u);
  EXPECT_EQ(sfpu_exp(0.0f, true, false), f32_from_bits(0x3f7a0000u));
  // Clamped at -88.5: A*(-88.5) + (B-C) < 0 rounds to 0.
  EXPECT_EQ(sfpu_exp(-kInf, true, false), 0.0f);
  EXPECT_EQ(sfpu_exp(-1e9f, true, false), 0.0f);
  for (float x = -10.0f; x <= 0.7f; x += 0.05f)  // Schraudolph's error stays within ~4%
    EXPECT_NEAR(sfpu_exp_lane(x, ExpAlgorithm::FastApprox), std::exp(x), 0.045 * std::exp(x)) << x;
}

TEST(TtsimSfpu, ApproxExpIsPiecewiseLinearInTheMantissa) {
  EXPECT_EQ(sfpu_exp_lane(0.0f, ExpAlgorithm::Approx), 1.0f);
  EXPECT_EQ(sfpu_exp_lane(std::log(2.0f) * 3, ExpAlgorithm::Approx), 8.0f);
  EXPECT_EQ(sfpu_exp_lane(100.0f, ExpAlgorithm::Approx), kInf);
  EXPECT_EQ(sfpu_exp_lane(-50.0f, ExpAlgorithm::Approx), 0.0f);
  for (float x = -10.0f; x <= 10.0f; x += 0.1f)
    EXPECT_NEAR(sfpu_exp_lane(x, ExpAlgorithm::Approx), std::exp(x), 0.07 * std::exp(x)) << x;
}

TEST(TtsimSfpu, AccurateExpWithinOneBf16UlpOrFp32Ulps) {
  for (float x = -20.0f; x <= 20.0f; x += 0.037f) {
    float ref = std::exp(x);
    EXPECT_NEAR(sfpu_exp(x, false, false), ref, bf16_ulp(ref)) << x;
    EXPECT_NEAR(sfpu_exp(x, false, true), ref, 4e-7f * ref) << x;
  }
  EXPECT_EQ(sfpu_exp(0.0f, false, false), 1.0f);
  EXPECT_EQ(sfpu_exp(-200.0f, false, false), 0.0f);
  EXPECT_EQ(sfpu_exp(200.0f, false, false), kInf);
  EXPECT_EQ(sfpu_exp(200.0f, false, true), kInf);
}

TEST(TtsimSfpu, Reciprocal) {
  for (float x : {1.0f, 2.0f, 3.0f, 0.1f, 7.5f, -4.0f, 1000.0f, 1e-3f}) {
    float ref = 1.0f / x;
    EXPECT_NEAR(sfpu_reciprocal(x, false, false), ref, bf16_ulp(ref)) << x;
    EXPECT_NEAR(sfpu_reciprocal(x, false, true), ref, 2.5e-7f * std::fabs(ref)) << x;
    EXPECT_NEAR(sfpu_reciprocal(x, true, false), ref, 2 * bf16_ulp(ref)) << x;
  }
  EXPECT_EQ(sfpu_reciprocal(0.0f, false, true), kInf);
  EXPECT_EQ(sfpu_reciprocal(kInf, false, true), 0.0f);
  // 1 / (1.5 * 2^126) is a denormal (2/3 * 2^-126): the scale 2^-126 times
  // y ~ 0.67 on the SFPU multiply-add has exponent field 0 and flushes to
  // 0, with the input's sign (an IEEE multiply kept the denormal).
  EXPECT_EQ(f32_bits(sfpu_reciprocal(std::ldexp(1.5f, 126), false, true)), 0u);
  EXPECT_EQ(f32_bits(sfpu_reciprocal(-std::ldexp(1.5f, 126), true, true)), 0x80000000u);
  EXPECT_EQ(f32_bits(sfpu_reciprocal(std::ldexp(1.0f, 126), false, true)), 0x00800000u);  // 2^-126 is normal
}

TEST(TtsimSfpu, SoftmaxUniformRowAndPaddingDoesNotLeak) {
  std::vector<float> v(3 * 5, 0.5f);
  TileTensor in = to_tile_layout(v.data(), {3, 5}, DataFormat::Bfloat16);
  for (bool approx : {true, false}) {
    ComputeConfig cfg = softmax_default_config();
    cfg.math_approx_mode = approx;
    TileTensor out;
    tt_softmax(in, out, cfg);
    ASSERT_EQ(out.shape, (Shape{3, 5}));
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 5; ++c) EXPECT_NEAR(out.at(0, r, c), 0.2f, bf16_ulp(0.2f)) << approx;
      for (int c = 5; c < 32; ++c) EXPECT_EQ(out.at(0, r, c), 0.0f);
    }
  }
}

TEST(TtsimSfpu, SoftmaxTracksReferenceAndMasksHugeNegatives) {
  std::vector<float> v = {0.1f, -0.4f, 0.3f, -1e9f, 0.0f, 0.25f, -0.2f, 0.05f};
  TileTensor in = to_tile_layout(v.data(), {1, 8}, DataFormat::Bfloat16);
  std::vector<double> ref(8);
  double s = 0;
  for (int i = 0; i < 8; ++i) s += ref[i] = std::exp(static_cast<double>(in.at(0, 0, i)));
  for (bool approx : {true, false})
    for (bool fp32 : {false, true}) {
      ComputeConfig cfg = softmax_default_config();
      cfg.math_approx_mode = approx;
      cfg.fp32_dest_acc_en = fp32;
      TileTensor out;
      tt_softmax(in, out, cfg);
      EXPECT_EQ(out.at(0, 0, 3), 0.0f);
      double tol = approx ? 0.01 : 0.002;
      for (int i = 0; i < 8; ++i) EXPECT_NEAR(out.at(0, 0, i), ref[i] / s, tol) << i << approx << fp32;
    }
}

// The scaled fast exp over a row: on every vector instruction set and both
// architectures the same bits as the lane model, element by element,
// including inputs the vector multiply-add cannot take (Inf, NaN, huge).
TEST(TtsimSfpu, ScaledFastApproxExpRowEqualsTheLaneModel) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(static_cast<float>(i % 37) - 18.0f, static_cast<int>(i % 9) - 3);
  std::vector<float> edges = x;
  edges[3] = -std::numeric_limits<float>::infinity();
  edges[70] = std::numeric_limits<float>::quiet_NaN();
  edges[100] = 3e38f;
  for (const std::vector<float>* in : {&x, &edges})
    for (Arch a : {Arch::Wormhole, Arch::Blackhole})
      for (simd::Isa isa : {simd::Isa::Avx2, simd::Isa::Avx512}) {
        const simd::KernelTable* k = simd::kernels_for(isa, a);
        if (!k) continue;
        for (float scale : {0.08838835f, 1.0f, 3.5f}) {
          std::vector<float> got(in->size());
          sfpu_exp_fast_approx_scaled(in->data(), static_cast<int64_t>(in->size()), scale, k, a, got.data());
          for (size_t i = 0; i < got.size(); ++i) {
            const float want = sfpu_exp_fast_approx_scaled((*in)[i], scale, a);
            EXPECT_EQ(f32_bits(got[i]), f32_bits(want)) << i << " scale " << scale << " " << simd::isa_name(isa);
          }
        }
      }
}
