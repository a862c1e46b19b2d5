// KV cache formats (backends/cpu/kv_format.h) against encoders written here
// from the formats' definitions, in another formulation:
//   q8_0 / q4_0: ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref
//     semantics (float32 operations, each rounded once, reproduced in double
//     arithmetic that rounds to float where ggml's float ops round; fp16
//     scale by the CPU's F16C conversion, not the project's software one),
//     compared byte for byte.
//   bfloat8_b / bfloat4_b: tt-sim's host encoder (ttsim/formats.h), code
//     for code, and decoded values equal to tt-sim's decode.
//   float16 / bfloat16: the F16C conversion / torch's rounding rule.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/kv_format.h"
#include "kv_rows.h"
#include "tensor/half.h"
#include "ttsim/formats.h"

namespace mha {
namespace {

__attribute__((target("f16c"))) uint16_t hw_f16(float x) { return _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT); }
__attribute__((target("f16c"))) float hw_f32(uint16_t h) { return _cvtsh_ss(h); }

float to_float(double x) { return static_cast<float>(x); }

// ggml q8_0, one block after another: scale amax/127 (float division), the
// reciprocal (0 for a zero scale), each product rounded half away from zero.
std::vector<uint8_t> oracle_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (std::size_t b = 0; b < x.size(); b += 32) {
    double amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(static_cast<double>(x[b + i])));
    const float d = to_float(amax / 127.0);
    const float id = d == 0.0f ? 0.0f : to_float(1.0 / d);
    const uint16_t h = hw_f16(d);
    out.push_back(h & 255), out.push_back(h >> 8);
    for (int i = 0; i < 32; ++i) {
      const double v = to_float(static_cast<double>(x[b + i]) * id);
      const double r = std::floor(std::abs(v) + 0.5);
      // A subnormal scale overflows its reciprocal: ggml's cast is then
      // undefined; the cache defines it as 0 (kv_format.cpp).
      out.push_back(std::isfinite(v) ? static_cast<uint8_t>(static_cast<int>(v < 0 ? -r : r)) : 0);
    }
  }
  return out;
}

// ggml q4_0: the signed value of the first largest magnitude over -8 is the
// scale; nibble = min(15, trunc(x/scale + 8.5)) with the sum rounded to float;
// element i in the low nibble of byte i, element i+16 in its high nibble.
std::vector<uint8_t> oracle_q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (std::size_t b = 0; b < x.size(); b += 32) {
    std::size_t arg = 0;
    for (std::size_t i = 1; i < 32; ++i)
      if (std::abs(x[b + i]) > std::abs(x[b + arg])) arg = i;
    const float d = to_float(static_cast<double>(x[b + arg]) / -8.0);
    const float id = d == 0.0f ? 0.0f : to_float(1.0 / d);
    const uint16_t h = hw_f16(d);
    out.push_back(h & 255), out.push_back(h >> 8);
    uint8_t nib[32];
    for (int i = 0; i < 32; ++i) {
      const float t = to_float(static_cast<double>(to_float(static_cast<double>(x[b + i]) * id)) + 8.5);
      nib[i] = std::isfinite(t) ? static_cast<uint8_t>(std::min(15.0, std::trunc(static_cast<double>(t)))) : 0;
    }
    for (int i = 0; i < 16; ++i) out.push_back(static_cast<uint8_t>(nib[i] | nib[i + 16] << 4));
  }
  return out;
}

std::vector<uint8_t> encode(CacheDtype dt, const std::vector<float>& x) {
  std::vector<uint8_t> b(kv_row_bytes(dt, static_cast<int64_t>(x.size())));
  kv_encode_row(dt, x.data(), static_cast<int64_t>(x.size()), b.data());
  return b;
}

// Random rows at several magnitudes, and the edge rows: zeros, all equal,
// huge (fp16 scale overflows), tiny (fp16 scale underflows), all negative,
// exact ties of the rounding, a largest magnitude shared by +x and -x.
std::vector<std::vector<float>> rows() {
  std::vector<std::vector<float>> r;
  std::mt19937 g(11);
  std::normal_distribution<float> n(0, 1);
  for (float scale : {1.0f, 1e-3f, 37.0f, 6e4f, 1e-6f})
    for (int k = 0; k < 8; ++k) {
      std::vector<float> v(64);
      for (float& e : v) e = n(g) * scale;
      r.push_back(v);
    }
  r.push_back(std::vector<float>(64, 0.0f));
  r.push_back(std::vector<float>(64, 0.75f));
  r.push_back(std::vector<float>(64, -3.0f));
  std::vector<float> huge(64), tiny(64), neg(64), ties(64), pm(64), sub(64);
  for (int i = 0; i < 64; ++i) {
    huge[i] = (i % 3 - 1) * 1e30f * (1 + i);
    tiny[i] = (i % 5 - 2) * 1e-30f * (1 + i);
    neg[i] = -0.01f * (i + 1);
    // Block 0: amax 127 -> scale 1, so the halves are ties for q8_0; block 1:
    // max -8 -> scale 1 for q4_0, its x + 8.5 landing on whole numbers.
    ties[i] = i < 32 ? (i == 0 ? 127.0f : (i % 2 ? 0.5f : -1.5f) + (i - 16)) : (i == 32 ? -8.0f : (i % 16) * 0.5f - 4.0f);
    pm[i] = i == 3 ? 2.0f : i == 9 ? -2.0f : i == 40 ? -5.0f : i == 41 ? 5.0f : 0.1f * (i % 7);
    // Shared exponents 1..4: block-float values tt-metal decodes near the
    // denormal range (the fast decoders read such face rows as zeros).
    sub[i] = (i % 3 - 1) * std::ldexp(1.0f + 0.25f * (i % 4), -126 + i / 16);
  }
  for (auto* v : {&huge, &tiny, &neg, &ties, &pm, &sub}) r.push_back(*v);
  return r;
}

TEST(KvFormat, Q8_0AndQ4_0MatchGgmlSemantics) {
  for (const auto& x : rows()) {
    EXPECT_EQ(encode(CacheDtype::Q8_0, x), oracle_q8_0(x));
    EXPECT_EQ(encode(CacheDtype::Q4_0, x), oracle_q4_0(x));
  }
}

TEST(KvFormat, QuantizedDecodeIsCodeTimesScale) {
  for (const auto& x : rows()) {
    const int64_t d = static_cast<int64_t>(x.size());
    for (CacheDtype dt : {CacheDtype::Q8_0, CacheDtype::Q4_0}) {
      const std::vector<uint8_t> b = encode(dt, x);
      std::vector<float> y(d);
      kv_rows_to_f32(dt, b.data(), 1, d, y.data(), d);
      const int64_t step = dt == CacheDtype::Q8_0 ? 34 : 18;
      for (int64_t i = 0; i < d; ++i) {
        const uint8_t* blk = b.data() + i / 32 * step;
        const float s = hw_f32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
        const int j = static_cast<int>(i % 32);
        const int q = dt == CacheDtype::Q8_0 ? static_cast<int8_t>(blk[2 + j]) : ((blk[2 + j % 16] >> (j < 16 ? 0 : 4)) & 15) - 8;
        const float want = static_cast<float>(q) * s;
        EXPECT_TRUE(std::memcmp(&want, &y[i], 4) == 0 || (std::isnan(want) && std::isnan(y[i]))) << i;
      }
    }
  }
}

TEST(KvFormat, BlockFloatsAreTtSimsHostEncoding) {
  for (const auto& x : rows())
    for (CacheDtype dt : {CacheDtype::Bfloat8_b, CacheDtype::Bfloat4_b}) {
      const int bits = dt == CacheDtype::Bfloat8_b ? 7 : 3;
      const std::vector<uint8_t> b = encode(dt, x);
      ASSERT_EQ(b.size(), x.size() / 16 * (bits == 7 ? 17 : 9));
      std::vector<float> y(x.size()), want(16);
      kv_rows_to_f32(dt, b.data(), 1, static_cast<int64_t>(x.size()), y.data(), static_cast<int64_t>(x.size()));
      for (std::size_t f = 0; f < x.size() / 16; ++f) {
        const ttsim::BfpRow r = ttsim::host_encode_bfp_row(x.data() + 16 * f, bits);
        const uint8_t* p = b.data() + f * (bits == 7 ? 17 : 9);
        EXPECT_EQ(p[0], r.shared_exp);
        for (int i = 0; i < 16; ++i) {
          const int code = bits == 7 ? p[1 + i] : (p[1 + i % 8] >> (i < 8 ? 0 : 4)) & 15;
          EXPECT_EQ(code, r.codes[i]) << f << " " << i;
        }
        ttsim::decode_bfp_row(r, bits, want.data());
        EXPECT_EQ(std::memcmp(want.data(), y.data() + 16 * f, 64), 0);
      }
    }
}

TEST(KvFormat, HalvesRoundToNearestEven) {
  for (const auto& x : rows()) {
    const int64_t d = static_cast<int64_t>(x.size());
    const std::vector<uint8_t> h = encode(CacheDtype::Float16, x), bf = encode(CacheDtype::Bfloat16, x);
    std::vector<float> yh(d), yb(d);
    kv_rows_to_f32(CacheDtype::Float16, h.data(), 1, d, yh.data(), d);
    kv_rows_to_f32(CacheDtype::Bfloat16, bf.data(), 1, d, yb.data(), d);
    for (int64_t i = 0; i < d; ++i) {
      EXPECT_EQ(h[2 * i] | h[2 * i + 1] << 8, hw_f16(x[i]));
      EXPECT_EQ(yh[i], hw_f32(hw_f16(x[i])));
      EXPECT_EQ(yb[i], round_bf16(x[i]));
    }
  }
}

TEST(KvFormat, RowsWidenAtAStrideAndSizesAreTheLayouts) {
  const int64_t d = 64, n = 3, ld = 70;
  const std::vector<std::pair<CacheDtype, int64_t>> sizes{
      {CacheDtype::Float32, 256}, {CacheDtype::Float16, 128}, {CacheDtype::Bfloat16, 128}, {CacheDtype::Q8_0, 68},
      {CacheDtype::Q4_0, 36},     {CacheDtype::Bfloat8_b, 68}, {CacheDtype::Bfloat4_b, 36}};
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto [dt, bytes] : sizes) {
    EXPECT_EQ(kv_row_bytes(dt, d), bytes) << cache_dtype_name(dt);
    std::vector<float> x(n * d), one(d), wide(n * ld, -7.0f);
    for (float& e : x) e = u(g);
    const std::vector<unsigned char> b = test::encode_rows(dt, x, n, d);
    kv_rows_to_f32(dt, b.data(), n, d, wide.data(), ld);
    for (int64_t r = 0; r < n; ++r) {
      std::copy(x.begin() + r * d, x.begin() + (r + 1) * d, one.begin());
      kv_round_row(dt, one.data(), d);
      EXPECT_EQ(std::memcmp(one.data(), wide.data() + r * ld, 4 * d), 0);
      for (int64_t i = d; i < ld && r + 1 < n; ++i) EXPECT_EQ(wide[r * ld + i], -7.0f);  // the gap is untouched
    }
  }
}

// The SIMD widening (the decode kernel's decoders) equals the scalar
// definition bit for bit on every row, odd widths for the one-element formats.
TEST(KvFormat, SimdWideningEqualsTheScalarDecode) {
  for (const auto& x : rows())
    for (CacheDtype dt : kAllCacheDtypes)
      for (int64_t d : {int64_t{64}, int64_t{cache_dtype_block(dt) > 1 ? 32 : 37}}) {
        const std::vector<float> xs(x.begin(), x.begin() + d);
        const std::vector<uint8_t> b = encode(dt, xs);
        std::vector<float> fast(d), slow(d);
        kv_rows_to_f32(dt, b.data(), 1, d, fast.data(), d);
        kv_row_to_f32_scalar(dt, b.data(), d, slow.data());
        for (int64_t i = 0; i < d; ++i)
          EXPECT_TRUE(std::memcmp(&fast[i], &slow[i], 4) == 0 || (std::isnan(fast[i]) && std::isnan(slow[i])))
              << cache_dtype_name(dt) << " d " << d << " element " << i << ": " << fast[i] << " vs " << slow[i];
      }
}

TEST(KvFormat, WidthsMustHoldWholeBlocks) {
  EXPECT_FALSE(kv_width_unsupported(CacheDtype::Float16, 37));
  EXPECT_FALSE(kv_width_unsupported(CacheDtype::Q4_0, 96));
  EXPECT_FALSE(kv_width_unsupported(CacheDtype::Bfloat4_b, 48));
  EXPECT_EQ(kv_width_unsupported(CacheDtype::Q8_0, 48).value_or(""),
            "cache_dtype q8_0 needs head widths divisible by 32, found head_dim 48");
  EXPECT_EQ(kv_width_unsupported(CacheDtype::Bfloat8_b, 40, "head_dim_v").value_or(""),
            "cache_dtype bfloat8_b needs head widths divisible by 16, found head_dim_v 40");
  EXPECT_EQ(cache_dtype_names(), "float32, float16, bfloat16, q8_0, q4_0, bfloat8_b, bfloat4_b");
  for (CacheDtype dt : kAllCacheDtypes) EXPECT_EQ(cache_dtype_from_name(cache_dtype_name(dt)), dt);
  EXPECT_FALSE(cache_dtype_from_name("q4_1"));
}

}  // namespace
}  // namespace mha
