// The packer's pack source formats (ttsim/packer.h): which one tt-metal
// selects, what each does to a Dst value, and the block floats a matmul
// writes through them. Hand-derived cases; the "old" values in comments are
// what tt-sim wrote when every block-float output went through bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "tensor/half.h"
#include "ttsim/eltwise.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {
// A face row: row[0] = first, every other value `rest`.
std::vector<float> row_of(float first, float rest) {
  std::vector<float> r(16, rest);
  r[0] = first;
  return r;
}
std::vector<float> pack(std::vector<float> dst, DataFormat out, bool fp32_dest, PackSrc src) {
  pack_dst(dst.data(), dst.data(), static_cast<int64_t>(dst.size()), out, fp32_dest, src);
  return dst;
}
}  // namespace

TEST(TtsimPacker, SourceFormatIsTtMetalsChoice) {
  // get_single_pack_src_format: block floats through Bfp8_b unless precise.
  for (bool fp32 : {false, true}) {
    EXPECT_EQ(pack_src_format(DataFormat::Bfp8_b, fp32, false), PackSrc::Bfp8_b);
    EXPECT_EQ(pack_src_format(DataFormat::Bfp4_b, fp32, false), PackSrc::Bfp8_b);
    EXPECT_EQ(pack_src_format(DataFormat::Bfloat16, fp32, true), PackSrc::Bfloat16);
  }
  EXPECT_EQ(pack_src_format(DataFormat::Bfp8_b, true, true), PackSrc::Float32);
  EXPECT_EQ(pack_src_format(DataFormat::Bfp4_b, true, true), PackSrc::Float32);
  EXPECT_EQ(pack_src_format(DataFormat::Bfp8_b, false, true), PackSrc::Bfloat16);
  EXPECT_EQ(pack_src_format(DataFormat::Float32, true, false), PackSrc::Float32);
  EXPECT_EQ(pack_src_format(DataFormat::Float32, false, false), PackSrc::Bfloat16);
  // Every choice is a mode ttsim's PACR has; the mode tt-sim used to take for
  // fp32 Dst block floats (bf16 source, 0x156) is not.
  for (DataFormat f : {DataFormat::Float32, DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b})
    for (bool fp32 : {false, true})
      for (bool precise : {false, true}) EXPECT_TRUE(pack_mode_supported(f, fp32, pack_src_format(f, fp32, precise)));
  EXPECT_FALSE(pack_mode_supported(DataFormat::Bfp8_b, true, PackSrc::Bfloat16));
  EXPECT_FALSE(pack_mode_supported(DataFormat::Bfloat16, false, PackSrc::Float32));
  float v[16] = {};
  EXPECT_THROW(pack_dst(v, v, 16, DataFormat::Bfp8_b, true, PackSrc::Bfloat16), std::logic_error);
}

TEST(TtsimPacker, Bfp8SourceRoundsHalfUpToSixMantissaBits) {
  // fp32 Dst: truncate to bf16, then (h + 1) & ~1.
  EXPECT_EQ(pack_dst_value(bits(0x3f80ffffu), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b), 1.0f);  // bf16 0x3f80
  EXPECT_EQ(pack_dst_value(bits(0x3f810000u), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b), bits(0x3f820000u));
  EXPECT_EQ(pack_dst_value(bits(0xbf810000u), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b), bits(0xbf820000u));
  EXPECT_EQ(pack_dst_value(bits(0x7f7f0000u), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(pack_dst_value(std::numeric_limits<float>::quiet_NaN(), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b),
            std::numeric_limits<float>::infinity());
  // Rounded first, flushed after: 0x007f rounds up to the smallest normal.
  EXPECT_EQ(pack_dst_value(bits(0x007f0000u), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b), bits(0x00800000u));
  EXPECT_EQ(f32_bits(pack_dst_value(bits(0x007e0000u), DataFormat::Bfp8_b, true, PackSrc::Bfp8_b)), 0u);
  // 16-bit Dst: NaN -> Inf, denormal -> +0, then the same m6 rounding.
  EXPECT_EQ(pack_dst_value(bits(0x3f830000u), DataFormat::Bfp8_b, false, PackSrc::Bfp8_b), bits(0x3f840000u));
  EXPECT_EQ(f32_bits(pack_dst_value(bits(0x807f0000u), DataFormat::Bfp8_b, false, PackSrc::Bfp8_b)), 0u);
  // Float32 source, fp32 Dst, block-float output: plain truncation to bf16.
  EXPECT_EQ(pack_dst_value(bits(0x3f81ffffu), DataFormat::Bfp8_b, true, PackSrc::Float32), bits(0x3f810000u));
  EXPECT_EQ(pack_dst_value(bits(0x3f81ffffu), DataFormat::Float32, true, PackSrc::Float32), bits(0x3f81ffffu));
}

// fp32 Dst 1 + 2^-8 at the row's largest exponent. bf16 source (old): rounds
// half away to 1 + 2^-7, then the block's half-up rounding to 7 bits gives
// 1 + 2^-6. Bfp8_b source (device default) and Float32 source (precise):
// truncated to 1.0, rounding from there keeps 1.0 -- the nearest value.
TEST(TtsimPacker, Fp32DstBfp8AtTheSharedExponentRoundsOnce) {
  const std::vector<float> dst = row_of(bits(0x3f808000u), 0.5f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, true, PackSrc::Bfp8_b)[0], 1.0f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, true, PackSrc::Float32)[0], 1.0f);
  // What the bf16 source would give (pack_fp32_to_bf16 then the block).
  std::vector<float> old = dst;
  for (float& x : old) x = pack_fp32_to_bf16(x);
  EXPECT_EQ(pack(old, DataFormat::Bfp8_b, false, PackSrc::Bfloat16)[0], 1.015625f);
}

// A bf16 Dst value 1 + 2^-7 one binade below the row's max (2.0): 7-bit
// block step 2^-5. bf16 source (old, and precise on 16-bit Dst): 8-bit 129
// -> (129 + 2) >> 2 = 32 -> 1.0. Bfp8_b source: m6 first makes it 130, then
// (130 + 2) >> 2 = 33 -> 1.03125 (double rounding, as the device does).
TEST(TtsimPacker, Bfp8SourceDoubleRoundsBelowTheSharedExponent) {
  std::vector<float> dst = row_of(2.0f, 0.0f);
  dst[1] = bits(0x3f810000u);
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, false, PackSrc::Bfp8_b)[1], 1.03125f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, false, PackSrc::Bfloat16)[1], 1.0f);
  // Same on fp32 Dst: Bfp8_b source double rounds, Float32 source (precise)
  // truncates to bf16 and rounds once.
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, true, PackSrc::Bfp8_b)[1], 1.03125f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, true, PackSrc::Float32)[1], 1.0f);
}

// The m6 rounding happens before the block is built, so an all-ones
// mantissa carries into the exponent: 1.9921875 (8-bit 255) packs as 2.0.
// From a bf16 source the block rounding saturates instead: 127 -> 1.984375
// (bfp8), and bfp4's top 3 bits of 127 -> 7 -> 1.75.
TEST(TtsimPacker, Bfp8SourceCarriesIntoTheSharedExponent) {
  const std::vector<float> dst = row_of(bits(0x3fff0000u), 0.0f);
  for (bool fp32 : {false, true}) {
    EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, fp32, PackSrc::Bfp8_b)[0], 2.0f);
    EXPECT_EQ(pack(dst, DataFormat::Bfp4_b, fp32, PackSrc::Bfp8_b)[0], 2.0f);
  }
  EXPECT_EQ(pack(dst, DataFormat::Bfp8_b, false, PackSrc::Bfloat16)[0], 1.984375f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp4_b, false, PackSrc::Bfloat16)[0], 1.75f);
  EXPECT_EQ(pack(dst, DataFormat::Bfp4_b, true, PackSrc::Float32)[0], 1.75f);
}

// The same through tt_matmul: a = identity-row selector, b's row 0 holds the
// Dst values, HiFi4 so that the products are exact.
TEST(TtsimPacker, MatmulBfp8OutputUsesThePackSource) {
  std::vector<float> av(32 * 32, 0.0f), bv(32 * 32, 0.0f);
  av[0] = 1.0f;
  bv[0] = 2.0f;
  bv[1] = bits(0x3f810000u);
  TileTensor a = to_tile_layout(av.data(), {32, 32}, DataFormat::Bfloat16);
  TileTensor b = to_tile_layout(bv.data(), {32, 32}, DataFormat::Bfloat16);
  ComputeConfig cfg;
  cfg.math_fidelity = MathFidelity::HiFi4;
  cfg.output = DataFormat::Bfp8_b;
  for (bool fp32 : {false, true})
    for (const Exec& ex : {Exec{simd::Isa::Scalar, nullptr}, Exec{}}) {
      cfg.fp32_dest_acc_en = fp32;
      TileTensor out;
      cfg.bfp8_pack_precise = false;
      tt_matmul(a, b, out, cfg, ex);
      EXPECT_EQ(out.at(0, 0, 1), 1.03125f) << "fp32 " << fp32;  // old: 1.0
      cfg.bfp8_pack_precise = true;
      tt_matmul(a, b, out, cfg, ex);
      EXPECT_EQ(out.at(0, 0, 1), 1.0f) << "fp32 " << fp32;
    }
}

// How many outputs the pack source moves: random normal matmuls (K = 256,
// HiFi2), Dst values taken from a Float32 output, packed both ways.
TEST(TtsimPacker, MeasuredShareOfMovedBfp8Outputs) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> av(128 * 256), bv(256 * 128);
  for (float& x : av) x = nd(rng);
  for (float& x : bv) x = nd(rng);
  TileTensor a = to_tile_layout(av.data(), {128, 256}, DataFormat::Bfloat16);
  TileTensor b = to_tile_layout(bv.data(), {256, 128}, DataFormat::Bfloat16);
  for (bool fp32 : {false, true})
    for (DataFormat f : {DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
      ComputeConfig cfg;
      cfg.fp32_dest_acc_en = fp32;
      cfg.output = DataFormat::Float32;  // the Dst values themselves
      TileTensor dst;
      tt_matmul(a, b, dst, cfg);
      std::vector<float> old = dst.data;
      if (fp32)
        for (float& x : old) x = pack_fp32_to_bf16(x);
      old = pack(old, f, false, PackSrc::Bfloat16);
      const std::vector<float> dev = pack(dst.data, f, fp32, pack_src_format(f, fp32, false));
      const std::vector<float> precise = pack(dst.data, f, fp32, pack_src_format(f, fp32, true));
      size_t moved = 0, moved_precise = 0;
      for (size_t i = 0; i < old.size(); ++i) {
        moved += f32_bits(old[i]) != f32_bits(dev[i]);
        moved_precise += f32_bits(old[i]) != f32_bits(precise[i]);
      }
      const double share = static_cast<double>(moved) / old.size();
      std::printf("%s, %s Dst: %.2f%% of outputs differ from bf16-source packing (precise: %.2f%%)\n",
                  format_name(f), fp32 ? "fp32" : "16-bit", 100 * share, 100.0 * moved_precise / old.size());
      EXPECT_GT(share, 0.001);
      EXPECT_LT(share, 0.5);
      if (!fp32) {
        EXPECT_EQ(moved_precise, 0u);  // 16-bit Dst precise = bf16 source
      }
    }
}

// Eltwise ops pack the same way: 2.0 + 0 and (1 + 2^-7) + 0 in one face row.
TEST(TtsimPacker, EltwiseBfp8OutputUsesThePackSource) {
  std::vector<float> av(32 * 32, 0.0f), zeros(32 * 32, 0.0f);
  av[0] = 2.0f;
  av[1] = bits(0x3f810000u);
  TileTensor a = to_tile_layout(av.data(), {32, 32}, DataFormat::Bfloat16);
  TileTensor z = to_tile_layout(zeros.data(), {32, 32}, DataFormat::Bfloat16);
  for (bool precise : {false, true}) {
    TileTensor sum = make_tile_tensor(a.shape, DataFormat::Bfp8_b), prod = make_tile_tensor(a.shape, DataFormat::Bfp8_b);
    tt_add(a, z, sum, false, precise);
    tt_mul_scalar(a, 1.0f, prod, MathFidelity::HiFi4, false, precise);
    EXPECT_EQ(sum.at(0, 0, 1), precise ? 1.0f : 1.03125f);
    EXPECT_EQ(prod.at(0, 0, 1), precise ? 1.0f : 1.03125f);
  }
}

// Softmax's output goes through the same packer: its block-float output is
// its Dst values (a Float32 output: the raw fp32 Dst, or the bf16 Dst as
// the Float16_b source writes it) packed through the selected source.
TEST(TtsimPacker, SoftmaxBlockFloatOutputIsItsDstPacked) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> v(64 * 70);
  for (float& x : v) x = nd(rng);
  const TileTensor x = to_tile_layout(v.data(), {64, 70}, DataFormat::Bfloat16);
  for (bool fp32 : {false, true})
    for (bool precise : {false, true})
      for (DataFormat f : {DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
        ComputeConfig cfg = softmax_default_config();
        cfg.fp32_dest_acc_en = fp32;
        cfg.bfp8_pack_precise = precise;
        cfg.output = DataFormat::Float32;
        TileTensor dst, got;
        tt_softmax(x, dst, cfg);
        cfg.output = f;
        tt_softmax(x, got, cfg);
        std::vector<float> want = dst.data;
        pack_from_dst(want.data(), want.data(), static_cast<int64_t>(want.size()), f, fp32, precise);
        size_t same = 0;
        for (size_t i = 0; i < want.size(); ++i) same += f32_bits(want[i]) == f32_bits(got.data[i]);
        EXPECT_EQ(same, want.size()) << format_name(f) << " fp32 " << fp32 << " precise " << precise;
      }
}

// Data movement repacks block-float values (<= 7 significant bits) into new
// face rows: there the Bfp8_b source's 6-bit rounding is exact, so it gives
// the same bits as a bf16 source (docs/TTSIM.md, op_move).
TEST(TtsimPacker, RepackOfBlockFloatValuesIsTheSameFromEitherSource) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (DataFormat f : {DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    std::vector<float> v(4096);
    for (float& x : v) x = nd(rng);
    host_quantize(v.data(), v.data(), static_cast<int64_t>(v.size()), f);
    std::shuffle(v.begin(), v.end(), rng);  // values regrouped into other face rows
    EXPECT_EQ(pack(v, f, false, PackSrc::Bfp8_b), pack(v, f, false, PackSrc::Bfloat16)) << format_name(f);
  }
}

// pack_dst's vector stage (Bfloat16 source) against pack_dst_value, the
// per-value rules, on bit patterns covering every exponent (0 and 255 with
// NaN payloads included), both signs, the bf16 rounding boundary (0x8000 in
// the low half) and a ragged length that leaves a scalar tail.
TEST(TtsimPacker, VectorBf16StageIsThePerValueRule) {
  std::mt19937 rng(5);
  std::vector<float> dst;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t s = 0; s < 2; ++s)
      for (uint32_t low : {0x0u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x7f0000u, 0x7f8000u, 0x7fffffu, 0x1u})
        dst.push_back(bits((s << 31) | (e << 23) | low));
  for (int i = 0; i < 4096; ++i) dst.push_back(bits(static_cast<uint32_t>(rng())));
  dst.resize(dst.size() - 3);
  for (bool fp32 : {false, true})
    for (DataFormat out : {DataFormat::Bfloat16, DataFormat::Float32}) {
      if (!pack_mode_supported(out, fp32, PackSrc::Bfloat16)) continue;
      const std::vector<float> got = pack(dst, out, fp32, PackSrc::Bfloat16);
      for (size_t i = 0; i < dst.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(pack_dst_value(dst[i], out, fp32, PackSrc::Bfloat16)))
            << "fp32_dest " << fp32 << " value " << std::hex << f32_bits(dst[i]);
    }
}

// The bf16 stage on whole rows (8 lanes at a time) equals the value rule one
// value at a time, for both Dst modes, on random bit patterns with every
// exponent, signed zeros, denormals, Inf, NaN and the rounding carries: a
// kernel may pack a block at once or value by value.
TEST(TtsimPacker, Bf16StageOnRowsEqualsTheValueRule) {
  std::mt19937 rng(3);
  std::vector<float> dst(4099);
  for (float& x : dst) x = f32_from_bits(rng());
  const uint32_t specials[] = {0u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
                               0x7fc00000u, 0x7f800001u, 0x3f80ffffu, 0x3f807fffu, 0x3f808000u, 0x7f7fffffu};
  for (size_t i = 0; i < std::size(specials); ++i) dst[i * 7] = f32_from_bits(specials[i]);
  for (bool fp32 : {false, true}) {
    const std::vector<float> rows = pack(dst, DataFormat::Bfloat16, fp32, PackSrc::Bfloat16);
    for (size_t i = 0; i < dst.size(); ++i)
      ASSERT_EQ(f32_bits(rows[i]), f32_bits(pack_dst_value(dst[i], DataFormat::Bfloat16, fp32, PackSrc::Bfloat16)))
          << std::hex << f32_bits(dst[i]) << " fp32 " << fp32;
  }
}
