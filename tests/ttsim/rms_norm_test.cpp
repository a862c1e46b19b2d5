// ttnn.rms_norm on tt-sim (backends/ttsim/ops/rms_norm/): the vector path
// equals the lane models bit for bit over compute configs, formats and
// widths; with an fp32 Dst the kernel tracks a float64 RMSNorm within its
// derived bound; sqrt_tile's lane model; the
// `mha op rms-norm` command.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/ttsim/ops/rms_norm/rms_norm.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/formats.h"
#include "ttsim/sfpu_sqrt.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::test;
using namespace mha::ttsim_test;

namespace {

TileTensor random_tiles(const Shape& s, DataFormat f, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, scale);
  int64_t count = 1;
  for (int64_t d : s) count *= d;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = n(g);
  return to_tile_layout(v.data(), s, f);
}

std::vector<float> random_gamma(int64_t w, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> raw(static_cast<size_t>(w));
  for (float& x : raw) x = u(g);
  return rms_norm_weight_bf16(raw.data(), w, false);
}

ComputeConfig config(MathFidelity f, bool approx, bool fp32, DataFormat out) {
  ComputeConfig c;
  c.math_fidelity = f;
  c.math_approx_mode = approx;
  c.fp32_dest_acc_en = fp32;
  c.output = out;
  return c;
}

}  // namespace

TEST(TtsimRmsNorm, VectorPathEqualsLaneModelsBitForBit) {
  const std::vector<simd::Isa> isas = simd::vector_isas();
  if (isas.empty()) GTEST_SKIP() << "no vector kernels on this host";
  struct Case {
    Shape shape;
    DataFormat in;
    ComputeConfig cfg;
    bool gamma;
    float scale;
  };
  const std::vector<Case> cases = {
      // tt_transformers' QK-norm: bf16 heads, HiFi2, exact, fp32 Dst.
      {{1, 4, 70, 128}, DataFormat::Bfloat16, config(MathFidelity::HiFi2, false, true, DataFormat::Bfloat16), true, 1},
      {{2, 40, 64}, DataFormat::Bfloat16, config(MathFidelity::HiFi4, true, false, DataFormat::Bfloat16), true, 3},
      {{1, 1, 33, 96}, DataFormat::Bfp8_b, config(MathFidelity::LoFi, false, false, DataFormat::Bfp8_b), false, 1},
      {{3, 32, 256}, DataFormat::Float32, config(MathFidelity::HiFi3, true, true, DataFormat::Float32), true, 1e-3f},
      {{1, 5, 40}, DataFormat::Bfloat16, config(MathFidelity::HiFi2, false, true, DataFormat::Bfloat16), true, 40},
      // Squares that flush to zero and that overflow, through the TF32 lanes.
      {{1, 1, 32, 64}, DataFormat::Float32, config(MathFidelity::HiFi4, false, true, DataFormat::Float32), true, 1e-21f},
      {{1, 1, 32, 64}, DataFormat::Float32, config(MathFidelity::HiFi4, false, true, DataFormat::Float32), true, 1e20f},
      {{1, 1, 32, 64}, DataFormat::Bfloat16, config(MathFidelity::HiFi2, true, false, DataFormat::Bfloat16), true, 1e20f},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const TileTensor x = random_tiles(c.shape, c.in, seed++, c.scale);
    const std::vector<float> g = c.gamma ? random_gamma(x.pcols, seed++) : std::vector<float>{};
    TileTensor want, got;
    tt_rms_norm(x, g, 1e-6f, want, c.cfg, Exec{simd::Isa::Scalar, nullptr});
    for (simd::Isa isa : isas) {
      tt_rms_norm(x, g, 1e-6f, got, c.cfg, Exec{isa, nullptr});
      EXPECT_TRUE(same_bits(want, got)) << simd::isa_name(isa) << " case " << seed;
    }
  }
}

// tt_transformers' configuration (fp32 Dst, here HiFi4 and exact SFPU)
// against x / sqrt(mean(x^2) + eps) * w in float64 on the same bf16 inputs.
// Bound, relative per element: the bf16 output's rounding (2^-8), y cut to
// SrcA's 9 mantissa bits for the weight multiply (2^-9), and TF32 cuts of
// r, y and x^2 as the Float32 CBs are unpacked (2^-10, 2^-10, 2^-11 via
// the root): 2.125 * 2^-8; the SFPU root and reciprocal add ~2^-16.
TEST(TtsimRmsNorm, Fp32DstTracksFloat64RmsNorm) {
  const int64_t W = 128;
  const TileTensor x = random_tiles({1, 2, 37, W}, DataFormat::Bfloat16, 11, 2.0f);
  const std::vector<float> g = random_gamma(W, 12);
  TileTensor out;
  tt_rms_norm(x, g, 1e-6f, out, config(MathFidelity::HiFi4, false, true, DataFormat::Bfloat16));
  double worst = 0.0;
  for (int64_t m = 0; m < x.batch; ++m)
    for (int64_t r = 0; r < x.rows; ++r) {
      double ss = 0.0;
      for (int64_t c = 0; c < W; ++c) ss += double(x.at(m, r, c)) * x.at(m, r, c);
      const double inv = 1.0 / std::sqrt(ss / W + 1e-6);
      for (int64_t c = 0; c < W; ++c) {
        const double want = x.at(m, r, c) * inv * g[c];
        if (std::fabs(want) > 1e-3) worst = std::max(worst, std::fabs(want - out.at(m, r, c)) / std::fabs(want));
      }
    }
  EXPECT_LT(worst, 2.25 * 0x1p-8);
  EXPECT_GT(worst, 0.0);  // the bf16 output cannot hold every value exactly
}

TEST(TtsimRmsNorm, SqrtLaneFollowsTheReciprocalRootAlgorithm) {
  // Approx mode halves the exponent: exact on even powers of two.
  EXPECT_EQ(sfpu_sqrt_lane(4.0f, true), 2.0f);
  EXPECT_EQ(sfpu_sqrt_lane(0.25f, true), 0.5f);
  // Exact mode: two Newton steps from the 0x5f37 seed, within 2^-16 of
  // sqrt; zero is left as is.
  EXPECT_EQ(sfpu_sqrt_lane(0.0f, false), 0.0f);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> e(-30.0f, 30.0f);
  for (int i = 0; i < 2000; ++i) {
    const float x = std::exp2(e(gen));
    const double want = std::sqrt(double(x));
    EXPECT_NEAR(sfpu_sqrt_lane(x, false) / want, 1.0, 0x1p-16) << x;
  }
}

TEST(TtsimRmsNorm, ValidateRefusesAWeightOfAnotherWidth) {
  const TileTensor x = random_tiles({1, 1, 32, 64}, DataFormat::Bfloat16, 1, 1);
  const std::vector<float> g(96, 1.0f);
  EXPECT_THROW(validate_rms_norm(x, &g), InputError);
}

TEST(TtsimRmsNormCli, OpRunsAndRefusesABadWeight) {
  TempDir d;
  const CommandResult py = run_python(
      "import numpy as np\nr = np.random.default_rng(5)\n"
      "np.save('" + d.file("x.npy") + "', r.standard_normal((1, 4, 40, 64)).astype(np.float32))\n"
      "np.save('" + d.file("w.npy") + "', r.uniform(0.5, 1.5, (1, 1, 2, 32)).astype(np.float32))\n"
      "np.save('" + d.file("bad.npy") + "', np.ones((48,), np.float32))\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const CommandResult r = run_mha("op rms-norm " + d.file("x.npy") + " " + d.file("w.npy") + " -o " + d.file("y.npy") +
                                  " --option epsilon=1e-6 --fp32-dest-acc-en --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"epsilon\""), std::string::npos) << r.out;
  const Tensor y = io::read_tensor(d.file("y.npy"));
  EXPECT_EQ(y.shape(), (Shape{1, 4, 40, 64}));
  const CommandResult bad = run_mha("op rms-norm " + d.file("x.npy") + " " + d.file("bad.npy") + " -o " + d.file("z.npy"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("one value per column"), std::string::npos) << bad.err;
}
