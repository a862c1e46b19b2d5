// Matmul K blocking (item 5 of the fidelity work): the packer's L1
// accumulation, spill/reload through the intermediate format, the program
// TT-NN picks for the seeds' matmuls, and the vector kernels against the
// lane models under every blocking.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/ttsim/ops/matmul/matmul_program.h"
#include "tensor/half.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/simd/kernels.h"

using namespace mha;
using namespace mha::ttsim;

namespace {

float bf(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }
uint16_t hb(float x) { return static_cast<uint16_t>(f32_bits(x) >> 16); }

// a: M x K with row 0 = `row0`, b: K x N with column values per k row.
TileTensor tensor(const std::vector<float>& v, int64_t rows, int64_t cols) {
  return to_tile_layout(v.data(), {rows, cols}, DataFormat::Bfloat16);
}

}  // namespace

TEST(TtsimKBlock, L1AccumulationRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0
  // (the Dst adder would round half away, to 1.0078125).
  EXPECT_EQ(l1_acc_bf16(1.0f, std::ldexp(1.0f, -8)), 1.0f);
  // 1.0078125 + 2^-8 is halfway to 1.015625, whose last bit is even.
  EXPECT_EQ(l1_acc_bf16(1.0078125f, std::ldexp(1.0f, -8)), 1.015625f);
  // Below the tie: down; negative ties to even too.
  EXPECT_EQ(l1_acc_bf16(-1.0f, -std::ldexp(1.0f, -8)), -1.0f);
  EXPECT_EQ(l1_acc_bf16(1.0f, std::ldexp(1.0f, -7)), 1.0078125f);
  // Carry out of the significand into the exponent.
  EXPECT_EQ(l1_acc_bf16(1.9921875f, std::ldexp(1.0f, -8)), 2.0f);
  // Denormal inputs count as zero; an underflowing sum is a signed zero.
  EXPECT_EQ(hb(l1_acc_bf16(bf(0x0001), bf(0x0002))), 0x0000);
  EXPECT_EQ(hb(l1_acc_bf16(bf(0x8081), bf(0x0080))), 0x8000);
  // +Inf + -Inf is the canonical NaN; overflow is Inf.
  EXPECT_EQ(hb(l1_acc_bf16(bf(0x7f80), bf(0xff80))), 0x7fc0);
  EXPECT_EQ(hb(l1_acc_bf16(bf(0x7f7f), bf(0x7f7f))), 0x7f80);
  // NaN counts as a huge finite value: NaN + finite is Inf, and a NaN in
  // L1 outweighs an incoming -Inf... only Inf itself cancels nothing.
  EXPECT_EQ(hb(l1_acc_bf16(bf(0x7fc1), 1.0f)), 0x7f80);
  EXPECT_EQ(hb(l1_acc_bf16(1.0f, bf(0xffc1))), 0xff80);
  // FP32: IEEE addition with denormals flushed.
  EXPECT_EQ(l1_acc_fp32(1.0f, std::ldexp(1.0f, -24)), 1.0f);
  EXPECT_EQ(f32_bits(l1_acc_fp32(f32_from_bits(0x00000005u), 0.0f)), 0u);
  EXPECT_EQ(f32_bits(l1_acc_fp32(std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity())),
            0x7fc00000u);
}

// The vector FP32 L1 accumulation against the per-value rule: random bit
// patterns (every exponent: denormals, Inf, NaN payloads), sums that cancel
// to a denormal, and a ragged length for the scalar tail.
TEST(TtsimKBlock, VectorFp32L1AccumulationIsThePerValueRule) {
  std::mt19937 rng(3);
  const int64_t n = 1 << 14;
  std::vector<float> l1(n), x(n);
  for (int64_t i = 0; i < n; ++i) {
    l1[i] = f32_from_bits(static_cast<uint32_t>(rng()));
    x[i] = i % 4 == 0 ? f32_from_bits(f32_bits(-l1[i]) ^ (static_cast<uint32_t>(rng()) & 0x7ffu))
                      : f32_from_bits(static_cast<uint32_t>(rng()) >> (i % 3 ? 0 : 8));
  }
  std::vector<float> got = l1;
  l1_acc_fp32(got.data(), x.data(), n - 5);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(f32_bits(got[i]), f32_bits(i < n - 5 ? l1_acc_fp32(l1[i], x[i]) : l1[i]))
        << std::hex << f32_bits(l1[i]) << " + " << f32_bits(x[i]);
}

// Three K tiles: block 0 gives 1.0, block 1 gives 2^-8, block 2 nothing.
// Without blocking the 16-bit Dst adds them and rounds half away
// (1.0078125); with L1 accumulation (1D program, blocks of one tile) the
// partials meet in the packer's adder, ties to even (1.0), and the last
// block starts from that reloaded sum.
TEST(TtsimKBlock, L1AccumulationChangesTheResult) {
  const int64_t M = 32, K = 96, N = 32;
  std::vector<float> va(M * K, 0.0f), vb(K * N, 0.0f);
  va[0] = 1.0f;
  va[32] = std::ldexp(1.0f, -8);
  for (int64_t n = 0; n < N; ++n) vb[0 * N + n] = vb[32 * N + n] = 1.0f;
  const TileTensor a = tensor(va, M, K), b = tensor(vb, K, N);
  ComputeConfig cfg;
  cfg.math_fidelity = MathFidelity::HiFi4;
  TileTensor plain, blocked, spilled;
  tt_matmul(a, b, plain, cfg);
  EXPECT_EQ(plain.data[0], 1.0078125f);
  MatmulBlocking l1;
  l1.in0_block_w = 1;
  l1.packer_l1_acc = true;
  tt_matmul(a, b, blocked, cfg, Exec{}, l1);
  EXPECT_EQ(blocked.data[0], 1.0f);
  // Spill/reload through bf16 with a 16-bit Dst changes nothing.
  MatmulBlocking spill;
  spill.in0_block_w = 1;
  tt_matmul(a, b, spilled, cfg, Exec{}, spill);
  EXPECT_EQ(spilled.data[0], 1.0078125f);
}

// Spilling through a bfloat8_b intermediate (L1 accumulation off, bfp8
// output) rounds each partial to block float: 2^-9 next to 1.0 in the same
// face row is 9 binades below the shared exponent and flushes to 0, so the
// second block adds to 0, not to 2^-9.
TEST(TtsimKBlock, SpillThroughBlockFloatRoundsPartials) {
  const int64_t M = 32, K = 64, N = 32;
  std::vector<float> va(M * K, 0.0f), vb(K * N, 0.0f);
  va[0] = 1.0f;
  va[32] = 1.0f;
  vb[0 * N + 0] = 1.0f;
  vb[0 * N + 1] = std::ldexp(1.0f, -9);
  vb[32 * N + 1] = std::ldexp(1.0f, -9);  // block 1 adds 2^-9 to column 1
  const TileTensor a = tensor(va, M, K), b = tensor(vb, K, N);
  ComputeConfig cfg;
  cfg.math_fidelity = MathFidelity::HiFi4;
  cfg.output = DataFormat::Float32;  // read the Dst result without a bfp output rounding
  TileTensor plain, spilled;
  tt_matmul(a, b, plain, cfg);
  EXPECT_EQ(plain.data[1], std::ldexp(1.0f, -8));
  MatmulBlocking spill;
  spill.in0_block_w = 1;
  spill.interm = DataFormat::Bfp8_b;
  tt_matmul(a, b, spilled, cfg, Exec{}, spill);
  EXPECT_EQ(spilled.data[0], 1.0f);
  EXPECT_EQ(spilled.data[1], std::ldexp(1.0f, -9));  // 0 after block 0's spill, then + 2^-9
}

// With a fused bias under L1 accumulation every block goes to L1 and the
// result is the L1 sum itself (no reload): block by block it equals
// tt_matmul on each K slice, summed with l1_acc_bf16.
TEST(TtsimKBlock, FusedBiasKeepsTheL1Sum) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int64_t M = 64, K = 128, N = 64, w = 2;
  std::vector<float> va(M * K), vb(K * N);
  for (auto& x : va) x = nd(rng);
  for (auto& x : vb) x = nd(rng);
  const TileTensor a = tensor(va, M, K), b = tensor(vb, K, N);
  ComputeConfig cfg;
  MatmulBlocking blk;
  blk.in0_block_w = w;
  blk.packer_l1_acc = true;
  blk.bias_fused = true;
  TileTensor got;
  tt_matmul(a, b, got, cfg, Exec{}, blk);
  std::vector<float> want(M * N);
  for (int64_t k0 = 0; k0 < K; k0 += w * 32) {
    std::vector<float> sa(M * w * 32), sb(w * 32 * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < w * 32; ++k) sa[m * w * 32 + k] = va[m * K + k0 + k];
    for (int64_t k = 0; k < w * 32; ++k)
      for (int64_t n = 0; n < N; ++n) sb[k * N + n] = vb[(k0 + k) * N + n];
    TileTensor part;
    tt_matmul(tensor(sa, M, w * 32), tensor(sb, w * 32, N), part, cfg);
    for (int64_t i = 0; i < M * N; ++i) want[i] = k0 == 0 ? part.data[i] : l1_acc_bf16(want[i], part.data[i]);
  }
  int64_t differ_from_plain = 0;
  TileTensor plain;
  tt_matmul(a, b, plain, cfg);
  for (int64_t i = 0; i < M * N; ++i) {
    ASSERT_EQ(f32_bits(got.data[i]), f32_bits(want[i])) << i;
    differ_from_plain += got.data[i] != plain.data[i];
  }
  EXPECT_GT(differ_from_plain, 0);  // blocking is visible on random data
}

TEST(TtsimKBlock, VectorKernelsMatchTheLaneModelUnderEveryBlocking) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const int64_t M = 64, K = 160, N = 64;  // Kt = 5: a ragged last block for w = 2
  std::vector<float> va(M * K), vb(K * N);
  for (auto& x : va) x = std::ldexp(nd(rng), static_cast<int>(rng() % 9) - 4);
  for (auto& x : vb) x = nd(rng);
  const TileTensor a = tensor(va, M, K), b = tensor(vb, K, N);
  for (simd::Isa isa : simd::vector_isas())
    for (bool fp32 : {false, true})
      for (int64_t w : {1, 2})
        for (int mode = 0; mode < 4; ++mode) {
          ComputeConfig cfg;
          cfg.fp32_dest_acc_en = fp32;
          cfg.output = mode == 3 ? DataFormat::Bfp8_b : DataFormat::Bfloat16;
          MatmulBlocking blk;
          blk.in0_block_w = w;
          blk.packer_l1_acc = mode == 1 || mode == 2;
          blk.bias_fused = mode == 2;
          blk.interm = fp32 ? DataFormat::Float32 : mode == 3 ? DataFormat::Bfp8_b : DataFormat::Bfloat16;
          if (blk.bias_fused) cfg.output = blk.interm;
          TileTensor want, got;
          tt_matmul(a, b, want, cfg, Exec{simd::Isa::Scalar, nullptr}, blk);
          tt_matmul(a, b, got, cfg, Exec{isa, nullptr}, blk);
          for (size_t i = 0; i < want.data.size(); ++i)
            ASSERT_EQ(f32_bits(want.data[i]), f32_bits(got.data[i]))
                << simd::isa_name(isa) << " fp32=" << fp32 << " w=" << w << " mode=" << mode << " at " << i;
        }
}

namespace {
MatmulCall call(int64_t ba, int64_t bb, int64_t M, int64_t K, int64_t N, bool core_grid, bool dram, bool bias,
                DataFormat a, DataFormat b, DataFormat out) {
  MatmulCall c;
  c.batch_a = ba;
  c.batch_b = bb;
  c.M = M;
  c.K = K;
  c.N = N;
  c.core_grid = core_grid;
  c.all_dram = dram;
  c.bias = bias;
  c.a = a;
  c.b = b;
  c.out = out;
  c.grid = {8, 8};
  return c;
}
void expect_choice(const MatmulCall& c, MatmulProgram p, int64_t w, bool l1, DataFormat interm) {
  SCOPED_TRACE(std::to_string(c.batch_a) + "x" + std::to_string(c.M) + "x" + std::to_string(c.K) + " @ " +
               std::to_string(c.K) + "x" + std::to_string(c.N));
  const MatmulChoice ch = choose_matmul_program(c);
  EXPECT_EQ(matmul_program_name(ch.program), std::string(matmul_program_name(p)));
  EXPECT_EQ(ch.blocking.in0_block_w, w);
  EXPECT_EQ(ch.blocking.packer_l1_acc, l1);
  EXPECT_EQ(format_name(ch.blocking.interm), std::string(format_name(interm)));
}
}  // namespace

// The programs tt-metal's matmul_program_config.cpp generates for seed 002's
// calls on an 8x8 Wormhole grid (derivation in docs/TTSIM.md).
TEST(TtsimKBlock, SeedMatmulsGetTtnnsPrograms) {
  const auto bf16 = DataFormat::Bfloat16, bfp8 = DataFormat::Bfp8_b;
  // ttnn_mha (DRAM, no core_grid): projections 1D with blocks of 2 tiles,
  // q @ k^T 2D in 2 blocks (no L1 accumulation), probs @ v 2D in 12.
  expect_choice(call(8, 1, 384, 1024, 1024, false, true, false, bf16, bf16, bf16), MatmulProgram::Mcast1D, 2, true, bf16);
  expect_choice(call(128, 128, 384, 64, 384, false, true, false, bf16, bf16, bf16), MatmulProgram::Mcast2D, 1, false,
                bf16);
  expect_choice(call(128, 128, 384, 384, 64, false, true, false, bf16, bf16, bf16), MatmulProgram::Mcast2D, 1, true, bf16);
  // fused (L1, core_grid 8x8): QKV and output linears 2D with blocks of 4
  // and the bias fused, the attention matmuls on the reuse program.
  expect_choice(call(8, 1, 384, 1024, 3072, true, false, true, bf16, bf16, bfp8), MatmulProgram::Mcast2D, 4, true, bf16);
  expect_choice(call(8, 1, 384, 1024, 1024, true, false, true, bf16, bf16, bf16), MatmulProgram::Mcast2D, 4, true, bf16);
  expect_choice(call(128, 128, 384, 64, 384, true, false, false, bfp8, bfp8, bf16), MatmulProgram::Reuse, 1, false, bf16);
  expect_choice(call(128, 128, 384, 384, 64, true, false, false, bf16, bfp8, bfp8), MatmulProgram::Reuse, 1, true, bf16);
  // Without L1 accumulation the intermediate is the output format; with an
  // FP32 Dst it is Float32.
  MatmulCall c = call(128, 128, 384, 384, 64, true, false, false, bf16, bfp8, bfp8);
  c.packer_l1_acc = false;
  expect_choice(c, MatmulProgram::Reuse, 1, false, bfp8);
  c.fp32_dest = true;
  expect_choice(c, MatmulProgram::Reuse, 1, false, DataFormat::Float32);
  // Seed 000 (book, tiny): one K tile, one block.
  const MatmulChoice book = choose_matmul_program(call(1, 1, 32, 32, 32, true, false, true, bf16, bf16, bf16));
  EXPECT_EQ(book.blocking.blocks(1), 1);
  // A float32 output turns TT-NN's L1 accumulation default off; its larger
  // output tiles no longer fit 16x16 per core, so the simple config's blocks
  // (8 tiles) split M and N and the program is 2D with K over the grid width.
  expect_choice(call(8, 1, 384, 1024, 1024, false, true, false, bf16, bf16, DataFormat::Float32),
                MatmulProgram::Mcast2D, 4, false, DataFormat::Float32);
}
