// The vector kernels against the scalar lane models they replace: every
// instruction set this CPU runs, every fidelity, both Dst modes, every data
// format, on random values with mixed exponents and on edge values. The
// comparison is bitwise: one differing bit fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensor/half.h"
#include "ttsim/kblock.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "ttsim/simd/kernels.h"
#include "util/thread_pool.h"

using namespace mha;
using namespace mha::ttsim;

namespace {

// Values whose exponents spread over `spread` binades around 1, with a
// share of edge values: zeros of both signs, denormals, the smallest and
// largest normals, Inf, NaN, and bf16 ties (a set bit right below bf16).
std::vector<float> values(std::mt19937& rng, size_t n, int spread, double edge_share) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-spread, spread);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<uint32_t> bits;
  const float edges[] = {0.0f, -0.0f, f32_from_bits(0x00000001u), f32_from_bits(0x807fffffu),
                         f32_from_bits(0x00800000u), f32_from_bits(0x80800001u),
                         std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                         std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), 1.0f + 1.0f / 256, -(1.0f + 3.0f / 256),
                         f32_from_bits(0x3f808000u), f32_from_bits(0x7f7f8000u)};
  std::vector<float> v(n);
  for (auto& x : v) {
    if (u(rng) < edge_share) {
      x = u(rng) < 0.5 ? edges[bits(rng) % (sizeof(edges) / sizeof(edges[0]))] : f32_from_bits(bits(rng));
    } else {
      x = std::ldexp(normal(rng), ex(rng));
    }
  }
  return v;
}

std::string bits_str(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", f32_bits(f));
  return buf;
}

// First differing element, or -1.
int64_t first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (f32_bits(a[i]) != f32_bits(b[i])) return static_cast<int64_t>(i);
  return -1;
}

const DataFormat kFormats[] = {DataFormat::Float32, DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b};
const MathFidelity kFidelities[] = {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi3, MathFidelity::HiFi4};

// tt_matmul on `isa` against the scalar lane model, bit for bit; a failure
// names the first differing element and both values' bits.
::testing::AssertionResult matmul_matches_scalar(const TileTensor& a, const TileTensor& b, const ComputeConfig& cfg,
                                                 simd::Isa isa, ThreadPool* pool) {
  TileTensor want, got;
  tt_matmul(a, b, want, cfg, Exec{simd::Isa::Scalar, nullptr});
  tt_matmul(a, b, got, cfg, Exec{isa, pool});
  const int64_t d = first_diff(want.data, got.data);
  if (d == -1) return ::testing::AssertionSuccess();
  ::testing::AssertionResult fail = ::testing::AssertionFailure() << "element " << d;
  if (want.data.size() == got.data.size()) fail << " want " << bits_str(want.data[d]) << " got " << bits_str(got.data[d]);
  else fail << ": " << want.data.size() << " values against " << got.data.size();
  return fail;
}

}  // namespace

TEST(TtsimSimdExact, MatmulEveryFidelityDstModeAndFormat) {
  std::mt19937 rng(20261122);
  ThreadPool pool(2);
  int cases = 0;
  for (simd::Isa isa : simd::vector_isas())
    for (MathFidelity fid : kFidelities)
      for (bool fp32 : {false, true})
        for (DataFormat fa : kFormats)
          for (DataFormat fb : kFormats) {
            // Alternate shapes: ragged (padding), batched in1, K of one tile.
            const int variant = cases % 3;
            Shape sa = variant == 0 ? Shape{40, 70} : variant == 1 ? Shape{2, 64, 96} : Shape{33, 32};
            Shape sb = variant == 0 ? Shape{70, 50} : variant == 1 ? Shape{2, 96, 64} : Shape{32, 64};
            const int spread = cases % 2 ? 30 : 6;
            std::vector<float> va = values(rng, shape_numel(sa), spread, 0.05);
            std::vector<float> vb = values(rng, shape_numel(sb), spread, 0.05);
            TileTensor a = to_tile_layout(va.data(), sa, fa), b = to_tile_layout(vb.data(), sb, fb);
            ComputeConfig cfg;
            cfg.math_fidelity = fid;
            cfg.fp32_dest_acc_en = fp32;
            cfg.output = kFormats[cases % 4];
            ASSERT_TRUE(matmul_matches_scalar(a, b, cfg, isa, &pool))
                << simd::isa_name(isa) << " " << fidelity_name(fid) << " fp32_dest=" << fp32 << " a " << format_name(fa)
                << " b " << format_name(fb);
            ++cases;
          }
  EXPECT_GE(cases, 128);
}

// Rows that cancel, sums at the edges of the exponent range, and the -1
// that Wormhole's leading-sign counter misreads.
TEST(TtsimSimdExact, MatmulCancellationAndRangeEdges) {
  std::mt19937 rng(7);
  for (simd::Isa isa : simd::vector_isas())
    for (bool fp32 : {false, true})
      for (MathFidelity fid : kFidelities) {
        const int64_t M = 32, K = 64, N = 32;
        std::vector<float> va(M * K), vb(K * N);
        std::uniform_int_distribution<int> pick(0, 5);
        for (int64_t i = 0; i < M * K; ++i) {
          const int64_t r = i / K, k = i % K;
          const float base = std::ldexp(1.0f + static_cast<float>(k % 7) / 8, static_cast<int>(r % 5) - 2);
          switch (pick(rng)) {
            case 0: va[i] = (k % 2 ? -1 : 1) * base; break;                    // pairs that cancel
            case 1: va[i] = std::ldexp(1.5f, 120 - static_cast<int>(r));  break;  // near overflow
            case 2: va[i] = std::ldexp(1.25f, -120 + static_cast<int>(r)); break; // near underflow
            case 3: va[i] = -std::ldexp(1.0f, -23); break;
            default: va[i] = base;
          }
        }
        for (int64_t i = 0; i < K * N; ++i) vb[i] = (i % 3 == 0 ? -1.0f : 1.0f) * std::ldexp(1.0f, static_cast<int>(i % 9) - 4);
        TileTensor a = to_tile_layout(va.data(), {M, K}, DataFormat::Bfloat16);
        TileTensor b = to_tile_layout(vb.data(), {K, N}, DataFormat::Bfloat16);
        ComputeConfig cfg;
        cfg.math_fidelity = fid;
        cfg.fp32_dest_acc_en = fp32;
        cfg.output = DataFormat::Float32;
        ASSERT_TRUE(matmul_matches_scalar(a, b, cfg, isa, nullptr))
            << simd::isa_name(isa) << " " << fidelity_name(fid) << " fp32_dest=" << fp32;
      }
}

// Every bf16 mantissa of both operands (so every piece), all four sign
// pairs, and alignment shifts 0-7 and 0-14 within a group (the products'
// rounding: vpmulhrsw of 4y + sign(y) with in0's sign on the multiplier,
// ties away from zero). Row r holds in0's mantissa r at every k, column n
// in1's mantissa n; in0's element i of a group sits i binades below the
// group's first in a face's first group and 2i in its second.
TEST(TtsimSimdExact, MatmulEveryPieceSignAndShift) {
  const int64_t M = 128, K = 32, N = 128;
  std::vector<float> va(M * K), vb(K * N);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const int shift = static_cast<int>(k % 8) * ((k / 8) % 2 ? 2 : 1) + static_cast<int>(k / 16);
      va[r * K + k] = ((r + k) % 3 == 0 ? -1.0f : 1.0f) * std::ldexp(1.0f + static_cast<float>(r) / 128, -shift);
    }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      vb[k * N + n] = ((3 * n + k) % 4 < 2 ? -1.0f : 1.0f) * (1.0f + static_cast<float>(n) / 128);
  TileTensor a = to_tile_layout(va.data(), {M, K}, DataFormat::Bfloat16);
  TileTensor b = to_tile_layout(vb.data(), {K, N}, DataFormat::Bfloat16);
  for (simd::Isa isa : simd::vector_isas())
    for (bool fp32 : {false, true})
      for (MathFidelity fid : kFidelities) {
        ComputeConfig cfg;
        cfg.math_fidelity = fid;
        cfg.fp32_dest_acc_en = fp32;
        cfg.output = DataFormat::Float32;
        ASSERT_TRUE(matmul_matches_scalar(a, b, cfg, isa, nullptr))
            << simd::isa_name(isa) << " " << fidelity_name(fid) << " fp32_dest=" << fp32;
      }
}

// in1 of 256 columns or more, whose decoded rows are padded to an odd
// number of cache lines (operands.h; 256 and 512 are padded, 288 is not),
// over K of several tiles (the kernel runs one tile a pass, storing and
// reloading the Dst between them), mixed exponents and edge values.
TEST(TtsimSimdExact, MatmulPaddedIn1RowsOverSeveralTiles) {
  std::mt19937 rng(256);
  ThreadPool pool(2);
  int cases = 0;
  for (simd::Isa isa : simd::vector_isas())
    for (MathFidelity fid : kFidelities)
      for (bool fp32 : {false, true})
        for (int64_t N : {256, 288, 512}) {
          const int64_t M = 40, K = 96;
          std::vector<float> va = values(rng, M * K, cases % 2 ? 30 : 6, 0.03);
          std::vector<float> vb = values(rng, K * N, cases % 2 ? 6 : 30, 0.03);
          TileTensor a = to_tile_layout(va.data(), {M, K}, DataFormat::Bfloat16);
          TileTensor b = to_tile_layout(vb.data(), {K, N}, cases % 3 ? DataFormat::Bfloat16 : DataFormat::Float32);
          ComputeConfig cfg;
          cfg.math_fidelity = fid;
          cfg.fp32_dest_acc_en = fp32;
          cfg.output = DataFormat::Float32;
          ASSERT_TRUE(matmul_matches_scalar(a, b, cfg, isa, &pool))
              << simd::isa_name(isa) << " " << fidelity_name(fid) << " fp32_dest=" << fp32 << " N " << N;
          ++cases;
        }
  EXPECT_GE(cases, 24);
}

// A decode step's activation: a few real rows over a 32-row tile of zeros
// (the vector path leaves trailing zero rows out of the kernel), with zero
// rows in between too (kept), every value zero in one block, and K split
// into blocks both ways (L1 accumulation, spill and reload).
TEST(TtsimSimdExact, MatmulTrailingZeroRows) {
  std::mt19937 rng(31);
  ThreadPool pool(2);
  int cases = 0;
  for (simd::Isa isa : simd::vector_isas())
    for (bool fp32 : {false, true})
      for (int64_t live : {0, 1, 3})
        for (bool l1 : {false, true}) {
          const int64_t M = 64, K = 128, N = 96;
          std::vector<float> va = values(rng, M * K, 6, 0.02), vb = values(rng, K * N, 6, 0.02);
          for (int64_t r = 0; r < M; ++r)
            if ((r >= live && r < 32) || r == 33 || r >= 40)  // block 0: `live` rows; block 1: 0-32, 34-39
              std::fill(va.begin() + r * K, va.begin() + (r + 1) * K, r % 2 ? -0.0f : 0.0f);
          TileTensor a = to_tile_layout(va.data(), {M, K}, DataFormat::Bfloat16);
          TileTensor b = to_tile_layout(vb.data(), {K, N}, DataFormat::Bfp8_b);
          ComputeConfig cfg;
          cfg.math_fidelity = MathFidelity::HiFi2;
          cfg.fp32_dest_acc_en = fp32;
          cfg.output = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
          MatmulBlocking blk;
          blk.in0_block_w = 2;
          blk.packer_l1_acc = l1;
          blk.interm = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
          TileTensor want, got;
          tt_matmul(a, b, want, cfg, Exec{simd::Isa::Scalar, nullptr}, blk);
          tt_matmul(a, b, got, cfg, Exec{isa, &pool}, blk);
          const int64_t d = first_diff(want.data, got.data);
          ASSERT_EQ(d, -1) << simd::isa_name(isa) << " fp32_dest=" << fp32 << " live rows " << live << " l1 " << l1
                           << ": element " << d << " want " << bits_str(want.data[d]) << " got " << bits_str(got.data[d]);
          for (int64_t c = 0; c < N; ++c) EXPECT_EQ(f32_bits(got.data[static_cast<size_t>(40 * N + c)]), 0u);
          ++cases;
        }
  EXPECT_GE(cases, 12);
}

TEST(TtsimSimdExact, EltwiseMulAddAndExp) {
  std::mt19937 rng(99);
  for (simd::Isa isa : simd::vector_isas()) {
    const simd::KernelTable& k = *simd::kernels_for(isa);
    for (int spread : {4, 40, 127}) {
      const int64_t n = 4096;
      std::vector<float> a = values(rng, n, spread, 0.08), b = values(rng, n, spread, 0.08), got(n);
      for (bool fp32 : {false, true}) {
        for (MathFidelity fid : kFidelities) {
          k.elwmul(a.data(), b.data(), 1, n, fidelity_phase_count(fid), fp32, got.data());
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(fpu_mul(a[i], b[i], fid, fp32)))
                << simd::isa_name(isa) << " mul " << fidelity_name(fid) << " " << a[i] << " * " << b[i];
          k.elwmul(a.data(), b.data() + 5, 0, n, fidelity_phase_count(fid), fp32, got.data());
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(fpu_mul(a[i], b[5], fid, fp32))) << "broadcast mul";
        }
        k.elwadd(a.data(), b.data(), 1, n, fp32, got.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(fpu_add(a[i], b[i], fp32)))
              << simd::isa_name(isa) << " add " << bits_str(a[i]) << " + " << bits_str(b[i]);
        k.elwadd(a.data(), b.data() + 3, 0, n, fp32, got.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(f32_bits(got[i]), f32_bits(fpu_add(a[i], b[3], fp32))) << "broadcast add";
        // exp inputs: softmax sees scaled scores, so also a dense band.
        std::vector<float> x = values(rng, n, spread / 8, 0.08);
        for (int64_t i = 0; i < n / 4; ++i) x[i] = std::uniform_real_distribution<float>(-100.0f, 100.0f)(rng);
        k.exp_fast_approx(x.data(), n, fp32, got.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(sfpu_exp(x[i], true, fp32))) << "exp(" << bits_str(x[i]) << ")";
      }
    }
  }
}

// The vector SFPMAD against sfpu_mad_bits on random finite triples (mixed
// exponents, cancelling sums, zeros and denormals), and exp fast-approx (which
// runs on it) on every bf16 pattern and a dense band where A*x + (B-C)
// cancels (x near -88).
TEST(TtsimSimdExact, SfpuMadAndFastExpEveryBf16) {
  std::mt19937 rng(2026);
  const int64_t n = 1 << 16;
  std::vector<uint32_t> a(n), b(n), c(n), got(n);
  for (int64_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(i % 4);
    auto field = [&](uint32_t lo, uint32_t span) { return (rng() & 0x807fffffu) | ((lo + rng() % span) << 23); };
    a[i] = field(kind == 3 ? 0 : 60, kind == 3 ? 40 : 130);
    b[i] = field(kind == 3 ? 0 : 60, kind == 3 ? 255 : 130);
    c[i] = kind == 3 ? field(0, 4) : field(40, 170);
    if (kind == 1) {  // c cancels most of the product
      const float p = -(f32_from_bits(a[i]) * f32_from_bits(b[i]));
      c[i] = f32_bits(p) + static_cast<uint32_t>(rng() % 64) - 32u;
    }
    if (kind == 2 && i % 8 == 2) a[i] = 0;
    // finite, product exponent field below 255
    if ((((a[i] >> 23) & 255u) + ((b[i] >> 23) & 255u)) >= 127 + 255) b[i] &= 0xbfffffffu;
    if (((c[i] >> 23) & 255u) == 255u) c[i] &= 0xbfffffffu;
  }
  // Products whose cut-off part is a single bit 2^(j+k) (every sticky
  // position), minus the rounded product (+-1 ulp): the residual shows it.
  int64_t at = 0;
  for (uint32_t j = 0; j < 23; ++j)
    for (uint32_t k = 0; k < 23; ++k)
      for (uint32_t d : {0u, 1u, 0xffffffffu}) {
        a[at] = 0x3f800000u | (1u << j);
        b[at] = 0xbf800000u | (1u << k);
        c[at] = (f32_bits(f32_from_bits(a[at]) * f32_from_bits(b[at])) ^ 0x80000000u) + d;
        ++at;
      }
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) x.push_back(f32_from_bits(h << 16));
  for (int i = 0; i < 4096; ++i) x.push_back(std::uniform_real_distribution<float>(-88.6f, -87.9f)(rng));
  for (int i = 0; i < 4096; ++i) x.push_back(f32_from_bits(static_cast<uint32_t>(rng())));
  std::vector<float> e(x.size());
  for (simd::Isa isa : simd::vector_isas()) {
    const simd::KernelTable& k = *simd::kernels_for(isa);
    k.mad_finite(a.data(), b.data(), c.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], sfpu_mad_bits(a[i], b[i], c[i]))
          << simd::isa_name(isa) << " mad " << std::hex << a[i] << " " << b[i] << " " << c[i];
    for (bool fp32 : {false, true}) {
      k.exp_fast_approx(x.data(), static_cast<int64_t>(x.size()), fp32, e.data());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(f32_bits(e[i]), f32_bits(sfpu_exp(x[i], true, fp32))) << simd::isa_name(isa) << " exp(" << bits_str(x[i]) << ")";
    }
  }
}

// The vector L1 accumulation against l1_acc_bf16 on every pair of bf16 edge
// values (zeros, denormals, the normal range's ends, Inf, NaN, values one
// ulp apart that cancel, ties) and on random bf16 pairs with exponents near
// each other (ties and carries) or far apart.
TEST(TtsimSimdExact, L1AccumulateBf16) {
  const uint32_t edges[] = {0x0000u, 0x8000u, 0x0001u, 0x807fu, 0x0080u, 0x8080u, 0x0081u, 0x7f7fu, 0xff7fu,
                            0x7f7eu, 0x7f80u, 0xff80u, 0x7fc0u, 0xffc1u, 0x7f81u, 0x3f80u, 0xbf80u, 0x3f81u,
                            0xbf81u, 0x3b80u, 0xbb80u, 0x3f01u, 0x4000u, 0xc07fu};
  std::vector<float> l1, x;
  for (uint32_t a : edges)
    for (uint32_t b : edges) {
      l1.push_back(f32_from_bits(a << 16));
      x.push_back(f32_from_bits(b << 16));
    }
  std::mt19937 rng(21);
  while (l1.size() % 32 != 0 || l1.size() < (1u << 16)) {
    const uint32_t a = rng() & 0xffffu;
    uint32_t b = rng() & 0xffffu;
    if (l1.size() % 2 == 0) b = (b & 0x807fu) | ((((a >> 7) & 0xffu) + rng() % 19 - 9) & 0xffu) << 7;
    l1.push_back(f32_from_bits(a << 16));
    x.push_back(f32_from_bits(b << 16));
  }
  std::vector<float> want(l1.size());
  for (size_t i = 0; i < l1.size(); ++i) want[i] = l1_acc_bf16(l1[i], x[i]);
  for (simd::Isa isa : simd::vector_isas()) {
    std::vector<float> got = l1;
    simd::kernels_for(isa)->l1_acc_bf16(got.data(), x.data(), static_cast<int64_t>(got.size()));
    const int64_t d = first_diff(got, want);
    ASSERT_EQ(d, -1) << simd::isa_name(isa) << ": " << bits_str(l1[static_cast<size_t>(d)]) << " + "
                     << bits_str(x[static_cast<size_t>(d)]) << " gave " << bits_str(got[static_cast<size_t>(d)])
                     << ", model " << bits_str(want[static_cast<size_t>(d)]);
  }
}
