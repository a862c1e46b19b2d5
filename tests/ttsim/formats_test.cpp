#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "ttsim/formats.h"
#include "ttsim/packer.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {
// A row of 16 values with x at index 0 and fill elsewhere.
void row_of(float out[16], float x, float fill) {
  for (int i = 0; i < 16; ++i) out[i] = fill;
  out[0] = x;
}
}  // namespace

TEST(TtsimFormats, Bf16RoundsToNearestEven) {
  EXPECT_EQ(host_round_bf16(bits(0x3f808000u)), bits(0x3f800000u));  // tie, even stays
  EXPECT_EQ(host_round_bf16(bits(0x3f818000u)), bits(0x3f820000u));  // tie, odd goes up
  EXPECT_EQ(host_round_bf16(bits(0x3f808001u)), bits(0x3f810000u));
  EXPECT_TRUE(std::isnan(host_round_bf16(std::numeric_limits<float>::quiet_NaN())));
  // ttnn.from_torch converts with torch: any NaN becomes bf16 0xFFFF (was:
  // sign and payload kept, 0x7fc00000 -> 0x7fc0, -NaN -> 0xffc0).
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fc0abcdu})
    EXPECT_EQ(f32_bits(host_round_bf16(bits(nan))), 0xffff0000u) << std::hex << nan;
}

TEST(TtsimFormats, Bfp8SharedExponentAndExactValues) {
  float in[16], out[16];
  for (int i = 0; i < 16; ++i) in[i] = 0.25f * i;  // max 3.75: exponent of 2
  BfpRow row = host_encode_bfp_row(in, 7);
  EXPECT_EQ(row.shared_exp, 128);
  decode_bfp_row(row, 7, out);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], in[i]) << i;  // multiples of 2^-5 survive
}

TEST(TtsimFormats, Bfp8TiesGoToEvenAfterTheShift) {
  float in[16], out[16];
  // Shared exponent 2^1 (from 2.0): step is 2^1 / 64 = 1/32.
  row_of(in, 2.0f, 0.0f);
  in[1] = 1.0f + 1.0f / 64;   // 32.5 steps -> tie -> 32 (even)
  in[2] = 1.0f + 3.0f / 64;   // 33.5 steps -> tie -> 34 (even)
  in[3] = 1.0f + 1.0f / 64 + 1.0f / 1024;  // above the tie -> 33
  host_quantize_bfp_row(in, out, 7);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 1.0f + 4.0f / 64);
  EXPECT_EQ(out[3], 1.0f + 2.0f / 64);
}

TEST(TtsimFormats, Bfp8RoundUpOverflowSaturates) {
  float in[16], out[16];
  row_of(in, bits(0x3fffffffu), 0.0f);  // 1.99999: rounds to 128 -> saturates at 127
  host_quantize_bfp_row(in, out, 7);
  EXPECT_EQ(out[0], 127.0f / 64);
  float in4[16], out4[16];
  row_of(in4, 1.9f, 0.0f);  // bfp4: 1.9 * 4 = 7.6 -> 8 -> saturates at 7
  host_quantize_bfp_row(in4, out4, 3);
  EXPECT_EQ(out4[0], 1.75f);
}

TEST(TtsimFormats, ZerosAndDenormalsFlushAndDropSign) {
  float in[16], out[16];
  row_of(in, 1.0f, 0.0f);
  in[1] = -0.0f;
  in[2] = bits(0x00400000u);   // denormal
  in[3] = -bits(0x00000001u);  // negative denormal
  in[4] = -1e-30f;             // underflows after the shift
  BfpRow row = host_encode_bfp_row(in, 7);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(row.codes[i], 0) << i;
  decode_bfp_row(row, 7, out);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(f32_bits(out[i]), 0u) << i;
}

TEST(TtsimFormats, WideExponentSpreadLosesSmallValues) {
  float in[16], out[16];
  row_of(in, 1024.0f, 1.0f);  // gap 10 > 7 bits: the ones vanish
  in[1] = 16.0f;              // gap 6: kept as the lowest magnitude bit
  in[2] = 8.0f;               // gap 7: shifted out entirely
  host_quantize_bfp_row(in, out, 7);
  EXPECT_EQ(out[0], 1024.0f);
  EXPECT_EQ(out[1], 16.0f);
  EXPECT_EQ(out[2], 0.0f);
  for (int i = 3; i < 16; ++i) EXPECT_EQ(out[i], 0.0f);
}

TEST(TtsimFormats, InfPoisonsItsRowNaNStaysNaN) {
  float in[16], out[16];
  row_of(in, std::numeric_limits<float>::infinity(), 1.5f);
  in[1] = -2.0f;
  host_quantize_bfp_row(in, out, 7);
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
  for (int i = 1; i < 16; ++i) EXPECT_EQ(out[i], 0.0f) << i;
  row_of(in, -std::numeric_limits<float>::quiet_NaN(), 3.0f);
  host_quantize_bfp_row(in, out, 7);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::signbit(out[0]));
  for (int i = 1; i < 16; ++i) EXPECT_EQ(out[i], 0.0f) << i;
  // A NaN whose payload sits below the kept bits reads back as Inf.
  row_of(in, bits(0x7f800001u), 0.0f);
  host_quantize_bfp_row(in, out, 7);
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
}

TEST(TtsimFormats, Bfp4KeepsThreeMagnitudeBits) {
  float in[16], out[16];
  row_of(in, 1.0f, 0.0f);
  in[1] = 0.75f;   // 3 steps of 0.25
  in[2] = 0.3f;    // 1.2 steps -> 1
  in[3] = -0.375f; // 1.5 steps -> tie -> 2 (even)
  in[4] = 0.125f;  // 0.5 steps -> tie -> 0: sign dropped
  host_quantize_bfp_row(in, out, 3);
  EXPECT_EQ(out[1], 0.75f);
  EXPECT_EQ(out[2], 0.25f);
  EXPECT_EQ(out[3], -0.5f);
  EXPECT_EQ(f32_bits(out[4]), 0u);
}

TEST(TtsimFormats, PackerBf16RoundsHalfAwayAndFlushes) {
  EXPECT_EQ(pack_fp32_to_bf16(bits(0x3f808000u)), bits(0x3f810000u));  // tie goes up, not to even
  EXPECT_EQ(pack_fp32_to_bf16(bits(0xbf808000u)), bits(0xbf810000u));
  EXPECT_EQ(pack_fp32_to_bf16(bits(0x3f807fffu)), bits(0x3f800000u));
  EXPECT_EQ(pack_fp32_to_bf16(bits(0x7f7fffffu)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(pack_fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_bits(pack_fp32_to_bf16(-bits(0x00400000u))), 0u);
}

TEST(TtsimFormats, PackerBfp8RoundsHalfUpAndBfp4Truncates) {
  float in[16], out[16];
  row_of(in, 2.0f, 0.0f);
  in[1] = bits(0x3f810000u);  // 1 + 1/128 at gap 1: 8-bit 129 -> (129+2)>>2 = 32 -> 1.0
  in[2] = bits(0x3f830000u);  // 1 + 3/128: 131 -> 33 -> 1 + 1/32
  in[3] = bits(0x3f820000u);  // 1 + 2/128: 130 -> 33 (a tie, rounded up)
  BfpRow row = pack_bf16_row_to_bfp(in, 7);
  decode_bfp_row(row, 7, out);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 1.0f + 1.0f / 32);
  EXPECT_EQ(out[3], 1.0f + 1.0f / 32);
  float in4[16], out4[16];
  row_of(in4, 1.0f, 0.0f);
  in4[1] = 0.98f;  // bf16 0.98046875: 7 bits 126 -> truncated to 3 bits: 3 -> 0.75
  row = pack_bf16_row_to_bfp(in4, 3);
  decode_bfp_row(row, 3, out4);
  EXPECT_EQ(out4[1], 0.75f);
}

TEST(TtsimFormats, NamesRoundTrip) {
  for (DataFormat f : {DataFormat::Float32, DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b})
    EXPECT_EQ(format_from_name(format_name(f)), f);
  EXPECT_ANY_THROW(format_from_name("bfloat8"));
}

// The unpacker (Src) and the host readback differ on a row whose shared
// exponent is smaller than an element's normalisation shift: shared 3, code
// 0x01 (magnitude 1, shift 6): the host flushes 2^(3-6-127) to 0, the
// unpacker wraps the exponent to 253 (2^126). A negative zero code is -Inf
// in Src and -0 on the host; a full magnitude is the same in both.
TEST(TtsimFormats, UnpackerWrapsSmallSharedExponentsWhereTheHostFlushes) {
  BfpRow row;
  row.shared_exp = 3;
  row.codes[0] = 0x40;  // 1.0 x 2^(3-127)
  row.codes[1] = 0x01;
  row.codes[2] = 0x80;
  row.codes[3] = 0x83;  // -(3/64) x 2^(3-127): shift 5, exponent 3-5 -> 254
  float host[16], src[16];
  decode_bfp_row(row, 7, host);
  unpack_bfp_row_to_src(row, 7, src);
  EXPECT_EQ(f32_bits(src[0]), 3u << 23);
  EXPECT_EQ(f32_bits(host[0]), 3u << 23);
  EXPECT_EQ(f32_bits(host[1]), 0u);
  EXPECT_EQ(f32_bits(src[1]), 253u << 23);
  EXPECT_EQ(src[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_bits(src[3]), 0x80000000u | (254u << 23) | (1u << 22));  // -1.5 x 2^127
  EXPECT_EQ(f32_bits(host[3]), 0u);
  // bfp4: code 0x1 (magnitude 1 of 3 bits, shift 2) with shared exponent 1.
  BfpRow r4;
  r4.shared_exp = 1;
  r4.codes[0] = 0x1;
  decode_bfp_row(r4, 3, host);
  unpack_bfp_row_to_src(r4, 3, src);
  EXPECT_EQ(f32_bits(host[0]), 0u);
  EXPECT_EQ(f32_bits(src[0]), 255u << 23);  // exponent 1 - 2 wraps to 255
}

// Why a block-float TileTensor can hold host-decoded floats: for every row an
// encoder writes (host conversion, or the packer from any pack source), the
// unpacker's values equal the host's, bit for bit -- including rows of tiny
// exponents, denormals, Inf and NaN.
TEST(TtsimFormats, UnpackerEqualsHostDecodeOnEveryEncodedRow) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any;
  int64_t rows = 0;
  for (int it = 0; it < 20000; ++it) {
    float in[16];
    const uint32_t top = 1 + any(rng) % 254, spread = any(rng) % 40;
    for (float& x : in) {
      const uint32_t drop = any(rng) % (spread + 1);
      const uint32_t e = drop >= top ? 0 : top - drop;
      x = f32_from_bits((any(rng) & 0x807fffffu) | (e << 23));
    }
    if (it % 100 == 0) in[any(rng) % 16] = it % 200 ? std::numeric_limits<float>::infinity() : std::nanf("");
    for (int bits : {7, 3}) {
      std::vector<BfpRow> encoded = {host_encode_bfp_row(in, bits)};
      for (bool fp32 : {false, true})
        for (PackSrc s : {PackSrc::Bfloat16, PackSrc::Bfp8_b, PackSrc::Float32}) {
          const DataFormat f = bits == 7 ? DataFormat::Bfp8_b : DataFormat::Bfp4_b;
          if (!pack_mode_supported(f, fp32, s)) continue;
          float stage[16];
          for (int j = 0; j < 16; ++j) stage[j] = pack_dst_value(fp32 ? in[j] : pack_bf16_passthrough(in[j]), f, fp32, s);
          encoded.push_back(pack_bf16_row_to_bfp(stage, bits));
        }
      for (const BfpRow& row : encoded) {
        float host[16], src[16];
        decode_bfp_row(row, bits, host);
        unpack_bfp_row_to_src(row, bits, src);
        for (int j = 0; j < 16; ++j)
          ASSERT_EQ(f32_bits(host[j]), f32_bits(src[j])) << "shared " << int(row.shared_exp) << " code " << int(row.codes[j]);
        ++rows;
      }
    }
  }
  EXPECT_EQ(rows, 200000);  // 20000 input rows x 2 widths x (host + 4 packer modes)
}

// host_quantize (the vector path every from_torch conversion takes) equals
// the per-value and per-row rules: host_round_bf16, host_quantize_bfp_row.
// Rows span every exponent gap, small shared exponents (results at and
// below exponent 0), saturating round-ups, zeros, denormals, Inf and NaN.
TEST(TtsimFormats, HostQuantizeEqualsTheRowRules) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  const int64_t rows = 20000, n = rows * 16 + 5;  // a tail that is no whole row (bf16 takes it)
  std::vector<float> in(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t top = any(rng) % 256, spread = any(rng) % 40;
    for (int j = 0; j < 16; ++j) {
      const uint32_t drop = any(rng) % (spread + 1);
      const uint32_t e = drop >= top ? 0 : top - drop;
      uint32_t u = (any(rng) & 0x807fffffu) | (e << 23);
      if (any(rng) % 8 == 0) u |= 0x007e0000u;  // near the rounding boundary: round-ups, saturation
      in[static_cast<size_t>(r * 16 + j)] = f32_from_bits(u);
    }
  }
  for (int64_t i = rows * 16; i < n; ++i) in[static_cast<size_t>(i)] = f32_from_bits(any(rng));
  for (DataFormat f : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    std::vector<float> got(in.size()), want(in.size());
    host_quantize(in.data(), got.data(), n, f);
    const int bits = bfp_magnitude_bits(f);
    if (bits == 0) {
      for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = host_round_bf16(in[static_cast<size_t>(i)]);
    } else {
      for (int64_t i = 0; i + 16 <= n; i += 16) host_quantize_bfp_row(&in[static_cast<size_t>(i)], &want[static_cast<size_t>(i)], bits);
      // A partial last row is not a block: host_quantize leaves it.
      for (int64_t i = rows * 16; i < n; ++i) want[static_cast<size_t>(i)] = got[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(f32_bits(got[static_cast<size_t>(i)]), f32_bits(want[static_cast<size_t>(i)]))
          << format_name(f) << " value " << i << " input bits " << std::hex << f32_bits(in[static_cast<size_t>(i)]);
  }
}
