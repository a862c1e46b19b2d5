// Blackhole's lane ops (--device blackhole) against a transcription of
// ttsim's Blackhole behaviour (blackhole_oracle.h), bit for bit: the SFPU
// multiply-add, SFPARECIP and the reciprocal built on it, the matrix unit's
// adder; then every vector kernel of the Blackhole tables against the
// Blackhole lane models, on every instruction set this CPU runs. Edge
// values throughout: zeros of both signs, denormals, the ends of the normal
// range, Inf, NaN, cancellations and carries. Hand-worked cases show where
// Blackhole and Wormhole part.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "blackhole_oracle.h"
#include "tensor/half.h"
#include "ttsim/eltwise.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "ttsim/simd/kernels.h"

using namespace mha;
using namespace mha::ttsim;

namespace {

constexpr Arch kBH = Arch::Blackhole, kWH = Arch::Wormhole;

uint32_t bh(uint32_t a, uint32_t b, uint32_t c) { return sfpu_mad_bits(a, b, c, kBH); }
uint32_t wh(uint32_t a, uint32_t b, uint32_t c) { return sfpu_mad_bits(a, b, c, kWH); }

// Bit patterns at the edges: zeros, denormals, the smallest normals and
// their neighbours, 1 and its neighbours, 2 (carries), the largest finite,
// 2^126 (SFPARECIP's limit), Inf, NaNs; each with both signs.
std::vector<uint32_t> edge_bits() {
  const uint32_t mags[] = {0x00000000u, 0x00000001u, 0x00400000u, 0x007fffffu, 0x00800000u, 0x00800001u,
                           0x00ffffffu, 0x01000000u, 0x1f800000u, 0x3effffffu, 0x3f000000u, 0x3f7fffffu,
                           0x3f800000u, 0x3f800001u, 0x3fc00000u, 0x3fffffffu, 0x40000000u, 0x40400001u,
                           0x5f800000u, 0x7e7fffffu, 0x7e800000u, 0x7f000000u, 0x7f7fffffu, 0x7f800000u,
                           0x7f800001u, 0x7fc00000u};
  std::vector<uint32_t> v;
  for (uint32_t m : mags) {
    v.push_back(m);
    v.push_back(m | 0x80000000u);
  }
  return v;
}

// Random bits with the exponent field drawn from [lo, lo + span).
uint32_t random_bits(std::mt19937& rng, uint32_t lo, uint32_t span) {
  return (rng() & 0x807fffffu) | ((lo + rng() % span) << 23);
}

uint32_t e_bits_or(std::mt19937& rng) {
  static const std::vector<uint32_t> e = edge_bits();
  const uint32_t v = e[rng() % e.size()];
  return ((v >> 23) & 255u) == 255u ? 0x3f800000u : v;  // finite edges (the FPU has no Inf/NaN rules)
}

}  // namespace

// Each where Blackhole differs from Wormhole, worked by hand from ttsim's
// fma_model_bh and fma_model_wh.
TEST(TtsimBlackhole, MadPartsFromWormholeInTheCorners) {
  // Signed zeros: -0 * 1 + -0 is -0 (both signs negative); Wormhole +0.
  EXPECT_EQ(bh(0x80000000u, 0x3f800000u, 0x80000000u), 0x80000000u);
  EXPECT_EQ(wh(0x80000000u, 0x3f800000u, 0x80000000u), 0u);
  // ... but -0 * 1 + +0 is +0 on both.
  EXPECT_EQ(bh(0x80000000u, 0x3f800000u, 0u), 0u);
  // A dropped product (2^-70 * -2^-60) with c = -0: -0.
  EXPECT_EQ(bh(0x1c800000u, 0xa1800000u, 0x80000000u), 0x80000000u);
  // -1.5 * 2^-126 + 2^-126 = -2^-127: below the normal range, flushed to a
  // zero of its sign (Wormhole: +0).
  EXPECT_EQ(bh(0xbfc00000u, 0x00800000u, 0x00800000u), 0x80000000u);
  EXPECT_EQ(wh(0xbfc00000u, 0x00800000u, 0x00800000u), 0u);
  // The carry of two places keeps both bits it loses as sticky: the tie
  // that Wormhole rounds down (tests/ttsim/sfpu_mad_test.cpp) is not a tie.
  EXPECT_EQ(bh(0x3fe94c00u, 0x3ff29800u, 0x3fad4288u), 0x4099dad1u);
  EXPECT_EQ(wh(0x3fe94c00u, 0x3ff29800u, 0x3fad4288u), 0x4099dad0u);
  // NaN is the canonical 0x7fc00000, whatever the signs and c.
  EXPECT_EQ(bh(0x7f800000u, 0u, 0x3fc00000u), 0x7fc00000u);
  EXPECT_EQ(bh(0xffc00000u, 0x3f800000u, 0x3f800000u), 0x7fc00000u);
  EXPECT_EQ(bh(0x3f800000u, 0x3f800000u, 0xff800001u), 0x7fc00000u);
  EXPECT_EQ(bh(0x7f800000u, 0x3f800000u, 0xff800000u), 0x7fc00000u);
  // A finite product that overflows meets -Inf as -Inf (Wormhole: NaN).
  EXPECT_EQ(bh(0x7f000000u, 0x40800000u, 0xff800000u), 0xff800000u);
  EXPECT_EQ(wh(0x7f000000u, 0x40800000u, 0xff800000u), 0x7f800001u);
  // Shared: the product cut before the add, and +0 on exact cancellation.
  EXPECT_EQ(bh(0x3f800001u, 0x3f800001u, 0xbf800002u), 0x32800000u);
  EXPECT_EQ(bh(0xbf800000u, 0x3f800000u, 0x3f800000u), 0u);
}

TEST(TtsimBlackhole, MadMatchesTheTranscriptionOnEdgesAndRandomTriples) {
  const std::vector<uint32_t> e = edge_bits();
  for (uint32_t a : e)
    for (uint32_t b : e)
      for (uint32_t c : e)
        ASSERT_EQ(bh(a, b, c), oracle::bh_mad(a, b, c)) << std::hex << a << " " << b << " " << c;
  std::mt19937 rng(27);
  for (int i = 0; i < 1500000; ++i) {
    const int kind = i % 5;
    uint32_t a, b, c;
    if (kind == 0) {  // anywhere
      a = rng(), b = rng(), c = rng();
    } else if (kind == 1) {  // comparable magnitudes: carries and cancellations
      a = random_bits(rng, 120, 16), b = random_bits(rng, 120, 16), c = random_bits(rng, 110, 20);
    } else if (kind == 2) {  // c cancels the product to within a few ulps
      a = random_bits(rng, 100, 50), b = random_bits(rng, 100, 50);
      c = (f32_bits(f32_from_bits(a) * f32_from_bits(b)) ^ 0x80000000u) + (rng() % 9) - 4;
    } else if (kind == 3) {  // near the bottom of the normal range
      a = random_bits(rng, 0, 8), b = random_bits(rng, 124, 8), c = random_bits(rng, 0, 6);
    } else {  // near the top
      a = random_bits(rng, 200, 55), b = random_bits(rng, 120, 60), c = random_bits(rng, 240, 16);
    }
    ASSERT_EQ(bh(a, b, c), oracle::bh_mad(a, b, c)) << std::hex << a << " " << b << " " << c;
  }
}

TEST(TtsimBlackhole, ArecipTableAndEdges) {
  // The table's rule against the values ttsim lists at a few indices.
  EXPECT_EQ(sfpu_arecip_bits(0x3f800000u), 0x3f7f0000u);  // 1.0 -> 127/128 + 1 scaled: 0.99609375
  EXPECT_EQ(sfpu_arecip_bits(0x3f860000u), (126u << 23) | (116u << 16));  // index 6
  EXPECT_EQ(sfpu_arecip_bits(0x3fff0000u), 126u << 23);                    // index 127: 0.5
  EXPECT_EQ(sfpu_arecip_bits(0x40000000u), 0x3eff0000u);                   // 2 -> ~0.498
  for (uint32_t i = 0; i < 128; ++i) {
    const uint32_t x = 0x3f800000u | (i << 16) | 0x1234u;
    ASSERT_EQ(sfpu_arecip_bits(x), oracle::bh_arecip(x)) << i;
    // Within 2^-7 relative of 1/x.
    const double rel = std::fabs(f32_from_bits(sfpu_arecip_bits(x)) * f32_from_bits(x) - 1.0);
    EXPECT_LT(rel, 1.0 / 128) << i;
  }
  EXPECT_EQ(sfpu_arecip_bits(0u), 0x7f800000u);
  EXPECT_EQ(sfpu_arecip_bits(0x80000000u), 0xff800000u);
  EXPECT_EQ(sfpu_arecip_bits(0x807fffffu), 0xff800000u);
  EXPECT_EQ(sfpu_arecip_bits(0x7e7fffffu), 0x00800000u);  // just below 2^126: 2^-126
  EXPECT_EQ(sfpu_arecip_bits(0x7e800000u), 0u);
  EXPECT_EQ(sfpu_arecip_bits(0xff800000u), 0x80000000u);
  EXPECT_EQ(sfpu_arecip_bits(0x7fc00000u), 0u);
  for (uint32_t x : edge_bits()) ASSERT_EQ(sfpu_arecip_bits(x), oracle::bh_arecip(x)) << std::hex << x;
}

TEST(TtsimBlackhole, ReciprocalMatchesTheTranscription) {
  std::vector<uint32_t> xs = edge_bits();
  std::mt19937 rng(13);
  for (int i = 0; i < 300000; ++i) xs.push_back(i % 2 ? static_cast<uint32_t>(rng()) : random_bits(rng, 100, 56));
  for (uint32_t x : xs)
    for (int iters : {0, 1, 2})
      ASSERT_EQ(f32_bits(sfpu_reciprocal_lane(f32_from_bits(x), iters, kBH)), oracle::bh_recip_lane(x, iters))
          << std::hex << x << " iters " << iters;
  // What recip_tile stores: approx is the bare estimate; exact rounds to
  // bf16 for a 16-bit Dst (one step) and keeps FP32 (two steps).
  const float x = 3.0f;
  EXPECT_EQ(f32_bits(sfpu_reciprocal(x, true, true, kBH)), oracle::bh_arecip(f32_bits(x)));
  EXPECT_EQ(sfpu_reciprocal(x, false, false, kBH), 0.333984375f);  // 1/3 in bf16 (0x3eab)
  EXPECT_LE(std::fabs(sfpu_reciprocal(x, false, true, kBH) - 1.0 / 3), std::ldexp(1.0, -25));
  // 0 and Inf keep their estimates: the residual is NaN and skips the steps.
  EXPECT_EQ(f32_bits(sfpu_reciprocal(0.0f, false, true, kBH)), 0x7f800000u);
  EXPECT_EQ(f32_bits(sfpu_reciprocal(-0.0f, false, true, kBH)), 0xff800000u);
  EXPECT_EQ(f32_bits(sfpu_reciprocal(-INFINITY, false, true, kBH)), 0x80000000u);
  // 2^126 and above: the estimate is 0 and the steps keep its sign.
  EXPECT_EQ(f32_bits(sfpu_reciprocal(-std::ldexp(1.0f, 127), false, true, kBH)), 0x80000000u);
  // Two steps from a 7-bit estimate: within 2 ulps of 1/x on random inputs.
  for (int i = 0; i < 100000; ++i) {
    const float v = f32_from_bits(random_bits(rng, 2, 250));
    const double want = 1.0 / v, got = sfpu_reciprocal_lane(v, 2, kBH);
    ASSERT_LE(std::fabs(got - want), 2 * std::ldexp(1.0, std::ilogb(want) - 23)) << v;
  }
}

// The adder's one Blackhole difference: a sum of exactly -1 unit.
// -(1 + 2^-23) in Dst plus 1.0 * 1.0 is -2^-23; Wormhole's leading-sign
// counter reads the -1 as all ones and gives -16.
TEST(TtsimBlackhole, MatrixUnitNormalisesMinusOneUlp) {
  const float d = f32_from_bits(0xbf800001u);
  EXPECT_EQ(f32_bits(fpu_mul_phase(1.0f, 1.0f, d, 0, true, kBH)), 0xb4000000u);
  EXPECT_EQ(fpu_mul_phase(1.0f, 1.0f, d, 0, true, kWH), -16.0f);
  // A 16-bit Dst cuts every term to 11 bits: the sum is never -1 there.
  EXPECT_EQ(f32_bits(fpu_mul_phase(1.0f, 1.0f, -1.0f, 0, false, kBH)), 0u);
}

TEST(TtsimBlackhole, MatrixUnitAdderMatchesTheTranscription) {
  std::mt19937 rng(41);
  auto term = [&](int base) {
    detail::Term t;
    t.sign = rng() & 1u;
    t.exp = base + static_cast<int>(rng() % 40) - 20;
    const int kind = static_cast<int>(rng() % 4);
    t.man = kind == 0 ? 0 : kind == 1 ? 1 : static_cast<int64_t>(rng() % (1u << 25));
    return t;
  };
  const std::vector<uint32_t> e = edge_bits();
  for (int i = 0; i < 1000000; ++i) {
    const int base = i % 3 == 0 ? 10 : i % 3 == 1 ? 127 : 245;
    const detail::Term t0 = term(base), t1 = i % 4 ? term(base) : detail::Term{};
    uint32_t dst = i % 5 == 0 ? e[rng() % e.size()] : random_bits(rng, static_cast<uint32_t>(base - 24), 48);
    if (i % 7 == 0) {  // Dst one unit from cancelling the first term
      dst = (t0.sign ^ 1u) << 31 | (static_cast<uint32_t>(std::max(1, t0.exp)) & 255u) << 23 | (rng() % 2);
    }
    for (bool fp32 : {true, false}) {
      const uint32_t want = oracle::bh_accumulate({t0.sign, t0.exp, t0.man}, {t1.sign, t1.exp, t1.man}, dst, fp32);
      ASSERT_EQ(detail::accumulate(t0, t1, dst, fp32, kBH), want)
          << i << " dst " << std::hex << dst << " fp32 " << fp32;
    }
  }
}

// The Blackhole kernel tables against the Blackhole lane models.
TEST(TtsimBlackhole, VectorMadAndFastExpMatchTheLaneModels) {
  std::mt19937 rng(77);
  const int64_t n = 1 << 16;
  std::vector<uint32_t> a(n), b(n), c(n), got(n);
  const std::vector<uint32_t> e = edge_bits();
  for (int64_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(i % 5);
    if (kind == 0) {
      a[i] = e[rng() % e.size()], b[i] = e[rng() % e.size()], c[i] = e[rng() % e.size()];
    } else if (kind == 1) {
      a[i] = random_bits(rng, 120, 16), b[i] = random_bits(rng, 120, 16), c[i] = random_bits(rng, 110, 20);
    } else if (kind == 2) {
      a[i] = random_bits(rng, 100, 50), b[i] = random_bits(rng, 100, 50);
      c[i] = (f32_bits(f32_from_bits(a[i]) * f32_from_bits(b[i])) ^ 0x80000000u) + (rng() % 9) - 4;
    } else if (kind == 3) {
      a[i] = random_bits(rng, 0, 8), b[i] = random_bits(rng, 124, 8), c[i] = random_bits(rng, 0, 6);
    } else {
      a[i] = random_bits(rng, 60, 130), b[i] = random_bits(rng, 60, 130), c[i] = random_bits(rng, 40, 170);
    }
    // The kernel's domain: finite operands, product exponent field below 255.
    for (uint32_t* v : {&a[i], &b[i], &c[i]})
      if (((*v >> 23) & 255u) == 255u) *v &= 0xbfffffffu;
    if ((((a[i] >> 23) & 255u) + ((b[i] >> 23) & 255u)) >= 127 + 255) b[i] &= 0xbfffffffu;
  }
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) x.push_back(f32_from_bits(h << 16));
  for (int i = 0; i < 8192; ++i) x.push_back(f32_from_bits(static_cast<uint32_t>(rng())));
  std::vector<float> ex(x.size());
  for (simd::Isa isa : simd::vector_isas()) {
    const simd::KernelTable& k = *simd::kernels_for(isa, kBH);
    k.mad_finite(a.data(), b.data(), c.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], bh(a[i], b[i], c[i])) << simd::isa_name(isa) << " " << std::hex << a[i] << " " << b[i] << " " << c[i];
    for (bool fp32 : {false, true}) {
      k.exp_fast_approx(x.data(), static_cast<int64_t>(x.size()), fp32, ex.data());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(f32_bits(ex[i]), f32_bits(sfpu_exp(x[i], true, fp32, kBH))) << simd::isa_name(isa) << " " << x[i];
    }
  }
}

// Matmul and the elementwise ops with cfg.arch Blackhole: scalar lane
// models against every vector ISA, with Dst values one unit from
// cancelling (the -1 sum) through K blocking with L1 partials.
TEST(TtsimBlackhole, VectorMatrixUnitMatchesTheLaneModels) {
  std::mt19937 rng(5);
  const int64_t M = 64, K = 128, N = 64;
  std::vector<float> va(M * K), vb(K * N);
  for (int64_t i = 0; i < M * K; ++i) {
    const int64_t k = i % K;
    switch (rng() % 5) {
      case 0: va[i] = (k % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f + (k % 7) / 8.0f, static_cast<int>(rng() % 5) - 2); break;
      case 1: va[i] = -std::ldexp(1.0f, -23); break;
      case 2: va[i] = f32_from_bits(e_bits_or(rng)); break;
      default: va[i] = std::ldexp(static_cast<float>(static_cast<int>(rng() % 255) - 127) / 64, static_cast<int>(rng() % 9) - 4);
    }
  }
  for (int64_t i = 0; i < K * N; ++i) vb[i] = (rng() % 3 == 0 ? -1.0f : 1.0f) * std::ldexp(1.0f + (rng() % 128) / 128.0f, static_cast<int>(rng() % 9) - 4);
  // Row 0, column 0: -1 and -2^-23 in the two product groups of the first
  // face leave -(1 + 2^-23) in an FP32 Dst; +1 in the next face makes the
  // sum exactly -1 unit.
  std::fill(va.begin(), va.begin() + K, 0.0f);
  va[0] = -1.0f, va[8] = -std::ldexp(1.0f, -23), va[16] = 1.0f;
  vb[0] = vb[8 * N] = vb[16 * N] = 1.0f;
  int64_t differs_from_wormhole = 0;
  for (DataFormat fmt : {DataFormat::Float32, DataFormat::Bfloat16})
    for (bool fp32 : {true, false})
      for (MathFidelity fid : {MathFidelity::LoFi, MathFidelity::HiFi4}) {
        TileTensor a = to_tile_layout(va.data(), {M, K}, fmt), b = to_tile_layout(vb.data(), {K, N}, fmt);
        ComputeConfig cfg;
        cfg.math_fidelity = fid;
        cfg.fp32_dest_acc_en = fp32;
        cfg.output = DataFormat::Float32;
        cfg.arch = kBH;
        MatmulBlocking blk;
        blk.in0_block_w = 2;
        blk.packer_l1_acc = true;
        blk.interm = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
        TileTensor want, got, wh_out;
        tt_matmul(a, b, want, cfg, Exec{simd::Isa::Scalar, nullptr}, blk);
        ComputeConfig wcfg = cfg;
        wcfg.arch = kWH;
        tt_matmul(a, b, wh_out, wcfg, Exec{simd::Isa::Scalar, nullptr}, blk);
        for (size_t i = 0; i < want.data.size(); ++i) differs_from_wormhole += f32_bits(want.data[i]) != f32_bits(wh_out.data[i]);
        TileTensor a2 = to_tile_layout(va.data() + 1, {M, K - 1}, fmt);
        TileTensor a3 = to_tile_layout(va.data(), {M, K - 1}, fmt);
        for (simd::Isa isa : simd::vector_isas()) {
          tt_matmul(a, b, got, cfg, Exec{isa, nullptr}, blk);
          for (size_t i = 0; i < want.data.size(); ++i)
            ASSERT_EQ(f32_bits(got.data[i]), f32_bits(want.data[i])) << simd::isa_name(isa) << " matmul " << i;
          TileTensor m_want = make_tile_tensor(a2.shape, DataFormat::Float32), m_got = m_want;
          tt_mul(a2, a3, m_want, fid, fp32, false, Exec{simd::Isa::Scalar, nullptr}, kBH);
          tt_mul(a2, a3, m_got, fid, fp32, false, Exec{isa, nullptr}, kBH);
          TileTensor s_want = m_want, s_got = m_want;
          tt_add(a2, a3, s_want, fp32, false, Exec{simd::Isa::Scalar, nullptr}, kBH);
          tt_add(a2, a3, s_got, fp32, false, Exec{isa, nullptr}, kBH);
          for (size_t i = 0; i < m_want.data.size(); ++i) {
            ASSERT_EQ(f32_bits(m_got.data[i]), f32_bits(m_want.data[i])) << simd::isa_name(isa) << " mul " << i;
            ASSERT_EQ(f32_bits(s_got.data[i]), f32_bits(s_want.data[i])) << simd::isa_name(isa) << " add " << i;
          }
        }
      }
  // The inputs reach the -1 sum somewhere: Blackhole and Wormhole differ.
  EXPECT_GT(differs_from_wormhole, 0);
}
