// Wormhole's SFPU multiply-add (sfpu_mad.h): hand-derived cases where it
// differs from an IEEE fused multiply-add, and random differential checks of
// the two forms it reduces to (SFPMUL, SFPADD), which are plain IEEE
// arithmetic with denormals flushed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tensor/half.h"
#include "ttsim/sfpu_mad.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {
float fb(uint32_t u) { return f32_from_bits(u); }
uint32_t mad(uint32_t a, uint32_t b, uint32_t c) { return sfpu_mad_bits(a, b, c); }
uint32_t fma_bits(uint32_t a, uint32_t b, uint32_t c) { return f32_bits(std::fmaf(fb(a), fb(b), fb(c))); }
}  // namespace

// Each case: the value ttsim's fma_model_wh rules give, worked by hand, and
// a check that an IEEE fma gives something else (so each one failed when
// SFPMAD was std::fmaf).
TEST(TtsimSfpuMad, ProductIsCutBeforeTheAdd) {
  // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46. The product keeps 26 fraction bits:
  // 1 + 2^-22, and the 2^-46 becomes a sticky bit at 2^-26. Minus
  // (1 + 2^-22) leaves that sticky bit: 2^-26 (IEEE: exactly 2^-46).
  EXPECT_EQ(mad(0x3f800001u, 0x3f800001u, 0xbf800002u), 0x32800000u);
  EXPECT_EQ(fma_bits(0x3f800001u, 0x3f800001u, 0xbf800002u), 0x28800000u);
  // Cancellation the other way round gives the same sticky bit, negative.
  EXPECT_EQ(mad(0xbf800001u, 0x3f800001u, 0x3f800002u), 0xb2800000u);
}

TEST(TtsimSfpuMad, CarryOfTwoPlacesKeepsOnlyItsOwnLowBitAsSticky) {
  // 1.82263 * 1.89526 (14-bit significands: the product is exact in the
  // 28-bit cut) + 1.35359 = 4.80796...: the sum has its leading one two
  // places up, its six low bits are 010010. Shifting right by two keeps
  // bits 4..2 = 100 and ORs only bit 0 (0) into the sticky place, so the
  // set bit 1 is lost: a tie, rounded to even (down). IEEE rounds up.
  EXPECT_EQ(mad(0x3fe94c00u, 0x3ff29800u, 0x3fad4288u), 0x4099dad0u);
  EXPECT_EQ(fma_bits(0x3fe94c00u, 0x3ff29800u, 0x3fad4288u), 0x4099dad1u);
}

TEST(TtsimSfpuMad, DenormalsAreZeroAndTinyResultsFlushWithoutSign) {
  // Denormal input: 2^-127 * 1024 is 2^-117 in IEEE, 0 here.
  EXPECT_EQ(mad(0x00400000u, 0x44800000u, 0u), 0u);
  EXPECT_EQ(fma_bits(0x00400000u, 0x44800000u, 0u), 0x05000000u);
  // A product below the smallest exponent is dropped: 2^-70 * 2^-60.
  EXPECT_EQ(mad(0x1c800000u, 0x21800000u, 0u), 0u);
  EXPECT_NE(fma_bits(0x1c800000u, 0x21800000u, 0u), 0u);
  // ... and then c comes back unchanged.
  EXPECT_EQ(mad(0x1c800000u, 0x21800000u, 0x3f800000u), 0x3f800000u);
  // Negative zero results lose their sign: -0 * 1 + -0 = +0 (IEEE -0).
  EXPECT_EQ(mad(0x80000000u, 0x3f800000u, 0x80000000u), 0u);
  EXPECT_EQ(fma_bits(0x80000000u, 0x3f800000u, 0x80000000u), 0x80000000u);
  // A denormal c with a zero product: +0, not c.
  EXPECT_EQ(mad(0u, 0x3f800000u, 0x80000001u), 0u);
  // A result that lands in the denormal range flushes: 1.5 * 2^-126 - 2^-126 = 2^-127.
  EXPECT_EQ(mad(0x3fc00000u, 0x00800000u, 0x80800000u), 0u);
  EXPECT_EQ(fma_bits(0x3fc00000u, 0x00800000u, 0x80800000u), 0x00400000u);
}

TEST(TtsimSfpuMad, InfAndNanCorners) {
  // Inf * 0 is NaN 0x7f800001 (positive here); the add still runs and c's
  // bits land in the payload: + 1.5 gives 0x7fc00001.
  EXPECT_EQ(mad(0x7f800000u, 0u, 0x3fc00000u), 0x7fc00001u);
  EXPECT_EQ(mad(0x7f800000u, 0u, 0u), 0x7f800001u);
  EXPECT_NE(fma_bits(0x7f800000u, 0u, 0x3fc00000u), 0x7fc00001u);
  // A finite product past the largest exponent counts as Inf: 2^127 * 4 +
  // (-Inf) is NaN (IEEE: -Inf).
  EXPECT_EQ(mad(0x7f000000u, 0x40800000u, 0xff800000u), 0x7f800001u);
  EXPECT_EQ(fma_bits(0x7f000000u, 0x40800000u, 0xff800000u), 0xff800000u);
  // NaN inputs: canonical 0x7f800001 with the product's sign, or c's sign
  // for a NaN c.
  EXPECT_EQ(mad(0xffc00000u, 0x3f800000u, 0x3f800000u), 0xff800001u);
  EXPECT_EQ(mad(0x3f800000u, 0x3f800000u, 0xffc00000u), 0xff800001u);
  // Inf results keep their sign; a product overflow is Inf.
  EXPECT_EQ(mad(0x7f000000u, 0x40800000u, 0x3f800000u), 0x7f800000u);
  EXPECT_EQ(mad(0xff800000u, 0x3f800000u, 0x3f800000u), 0xff800000u);
  EXPECT_EQ(mad(0x3f800000u, 0x3f800000u, 0xff800000u), 0xff800000u);
  EXPECT_EQ(f32_bits(sfpu_mad(2.0f, kInf, kInf)), 0x7f800000u);
  // Exact cancellation is +0 whatever the signs.
  EXPECT_EQ(mad(0xbf800000u, 0x3f800000u, 0x3f800000u), 0u);
}

// Independent statement: with c = +0 (SFPMUL) the cut product keeps 26+
// fraction bits and a sticky bit, so the result is IEEE a * b correctly
// rounded; with a = 1.0 (SFPADD) the product is exact and the aligned
// addend keeps three extra bits and a sticky bit, so the result is IEEE
// a + b. Both with denormal inputs as 0 and results below 2^-126 as +0.
TEST(TtsimSfpuMad, MulAndAddAreIeeeWithDenormalsFlushed) {
  std::mt19937 rng(5);
  auto random_float = [&](int spread) {
    const uint32_t e = 127 - spread + rng() % (2 * spread + 1);
    return fb(((rng() & 1u) << 31) | (e << 23) | (rng() & 0x7fffffu));
  };
  auto ftz = [](float v) { return std::fabs(v) < std::ldexp(1.0f, -126) ? 0.0f : v; };
  int64_t checked = 0;
  for (int spread : {2, 30, 126}) {
    for (int i = 0; i < 300000; ++i) {
      const float a = random_float(spread), b = random_float(spread);
      const double exact_p = static_cast<double>(a) * b, exact_s = static_cast<double>(a) + b;
      if (std::fabs(exact_p) >= std::ldexp(1.0, -126)) {
        ASSERT_EQ(f32_bits(sfpu_mul(a, b)), f32_bits(ftz(a * b))) << a << " * " << b;
        ++checked;
      }
      if (std::fabs(exact_s) >= std::ldexp(1.0, -126) || exact_s == 0.0) {
        ASSERT_EQ(f32_bits(sfpu_add(a, b)), f32_bits(ftz(a + b) + 0.0f)) << a << " + " << b;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1500000);
}

// SFPMAD itself differs from IEEE fma on a few percent of random triples
// (the cut product), and on most triples that cancel.
TEST(TtsimSfpuMad, DiffersFromFmaOnSomeRandomTriples) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  int differ = 0, cancel_differ = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float a = u(rng), b = u(rng), c = u(rng);
    if (sfpu_mad(a, b, c) != std::fmaf(a, b, c)) ++differ;
    const float cc = -(a * b) * (1.0f + std::ldexp(1.0f, -20) * static_cast<float>(rng() % 8));
    if (f32_bits(sfpu_mad(a, b, cc)) != f32_bits(std::fmaf(a, b, cc))) ++cancel_differ;
  }
  EXPECT_GT(differ, n / 100);
  EXPECT_LT(differ, n / 10);
  EXPECT_GT(cancel_differ, n / 2);
}
