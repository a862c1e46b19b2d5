// SDPA prefill (src/ttsim/sdpa.h): the fast path bit for bit against the
// oracle (every instruction set this CPU runs, program configs, formats,
// edge values), and the op's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

struct PrefillCase {
  const char* name;
  Shape q, kv;
  SdpaConfig cfg;
  DataFormat fq = DataFormat::Bfloat16, fkv = DataFormat::Bfloat16;
  bool mask = false;
  float scale = 1.0f;  // of the inputs' values
};

void expect_fast_equals_oracle(const PrefillCase& c) {
  const TileTensor q = tiles(c.q, 1, c.fq, c.scale), k = tiles(c.kv, 2, c.fkv, c.scale), v = tiles(c.kv, 3, c.fkv);
  TileTensor m;
  if (c.mask) {
    // Half the keys masked with -1e9 (tt-metal's test mask), as bfloat4_b.
    const Shape ms{c.q[0], 1, c.q[2], c.kv[2]};
    std::vector<float> mv(static_cast<size_t>(shape_numel(ms)));
    std::mt19937 g(7);
    for (float& x : mv) x = (g() & 1) ? -1e9f : 0.0f;
    m = to_tile_layout(mv.data(), ms, DataFormat::Bfp4_b);
  }
  TileTensor want;
  tt_sdpa_oracle(q, k, v, c.mask ? &m : nullptr, want, c.cfg);
  for (simd::Isa isa : simd::vector_isas()) {
    static ThreadPool three(3);  // results never depend on the thread count
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
      TileTensor got;
      tt_sdpa(q, k, v, c.mask ? &m : nullptr, got, c.cfg, Exec{isa, pool});
      EXPECT_TRUE(same_bits(got, want)) << c.name << " on " << simd::isa_name(isa);
    }
  }
  // The output is a softmax-weighted mean of V: finite, and not all zero.
  double norm = 0;
  for (float x : want.data) {
    ASSERT_TRUE(std::isfinite(x)) << c.name;
    norm += std::fabs(x);
  }
  EXPECT_GT(norm, 0.0) << c.name;
}

SdpaConfig cfg(int64_t qc, int64_t kc, bool causal = true) {
  SdpaConfig c;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.is_causal = causal;
  return c;
}

}  // namespace

TEST(TtsimSdpa, FastEqualsOracleAcrossProgramConfigs) {
  std::vector<PrefillCase> cases;
  for (auto [qc, kc] : {std::pair<int, int>{32, 32}, {64, 32}, {32, 64}, {128, 64}, {64, 128}})
    for (bool causal : {true, false}) cases.push_back({"chunks", {1, 2, 128, 64}, {1, 2, 128, 64}, cfg(qc, kc, causal)});
  // GQA (4 query heads on 2 kv heads), batch 2, dh 40 (padded to 64), dh 128.
  cases.push_back({"gqa", {2, 4, 64, 64}, {2, 2, 64, 64}, cfg(32, 32)});
  cases.push_back({"mqa", {1, 3, 64, 32}, {1, 1, 64, 32}, cfg(32, 64)});
  cases.push_back({"dh40", {1, 2, 96, 40}, {1, 2, 96, 40}, cfg(32, 32)});
  cases.push_back({"dh128", {1, 1, 64, 128}, {1, 1, 64, 128}, cfg(64, 32)});
  // Non-causal with a bfloat4_b mask, and K longer than Q.
  PrefillCase mk{"mask", {1, 2, 64, 64}, {1, 2, 96, 64}, cfg(32, 32, false)};
  mk.mask = true;
  cases.push_back(mk);
  cases.push_back({"sk>sq", {1, 2, 64, 64}, {1, 2, 128, 64}, cfg(64, 64, false)});
  for (const PrefillCase& c : cases) expect_fast_equals_oracle(c);
}

// 256 keys or more: K^T's decoded rows are padded to an odd number of cache
// lines (operands.h), causal and not, at both Dst modes (a 16-bit Dst skips
// the packer's identity pass on the matrix unit's results, an FP32 one
// does not).
TEST(TtsimSdpa, FastEqualsOracleWithPaddedKeyRows) {
  std::vector<PrefillCase> cases;
  for (bool fp32 : {false, true}) {
    PrefillCase c{"256 keys", {1, 2, 256, 64}, {1, 1, 256, 64}, cfg(64, 128)};
    c.cfg.compute.fp32_dest_acc_en = fp32;
    c.cfg.compute.math_fidelity = fp32 ? MathFidelity::HiFi4 : MathFidelity::HiFi2;
    cases.push_back(c);
  }
  cases.push_back({"512 keys, not causal", {1, 1, 64, 64}, {1, 1, 512, 64}, cfg(32, 256, false)});
  for (const PrefillCase& c : cases) expect_fast_equals_oracle(c);
}

TEST(TtsimSdpa, FastEqualsOracleAcrossComputeConfigsAndFormats) {
  std::vector<PrefillCase> cases;
  for (MathFidelity f : {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi3, MathFidelity::HiFi4})
    for (bool fp32 : {false, true}) {
      PrefillCase c{"fidelity x dst", {1, 2, 96, 64}, {1, 1, 96, 64}, cfg(32, 32)};
      c.cfg.compute.math_fidelity = f;
      c.cfg.compute.fp32_dest_acc_en = fp32;
      cases.push_back(c);
    }
  for (bool exp_approx : {false, true})
    for (bool approx : {false, true})
      for (bool fp32 : {false, true}) {
        PrefillCase c{"exp x recip approx", {1, 1, 128, 64}, {1, 1, 128, 64}, cfg(32, 32)};
        c.cfg.exp_approx_mode = exp_approx;
        c.cfg.compute.math_approx_mode = approx;
        c.cfg.compute.fp32_dest_acc_en = fp32;
        cases.push_back(c);
      }
  for (DataFormat in : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b})
    for (DataFormat out : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Float32}) {
      PrefillCase c{"formats", {1, 2, 64, 64}, {1, 2, 64, 64}, cfg(32, 32)};
      c.fq = c.fkv = in;
      c.cfg.compute.output = out;
      c.cfg.compute.fp32_dest_acc_en = out == DataFormat::Float32;
      cases.push_back(c);
    }
  PrefillCase precise{"bfp8 precise", {1, 1, 64, 64}, {1, 1, 64, 64}, cfg(32, 32)};
  precise.cfg.compute.output = DataFormat::Bfp8_b;
  precise.cfg.compute.bfp8_pack_precise = true;
  cases.push_back(precise);
  for (const PrefillCase& c : cases) expect_fast_equals_oracle(c);
}

// Scores far beyond exp's range (inputs x30: |q.k| * scale ~ 1e3), tiny
// inputs (1e-20: denormal products flush), a scale of 1, and rows of equal
// scores.
TEST(TtsimSdpa, FastEqualsOracleOnEdgeValues) {
  std::vector<PrefillCase> cases;
  for (float s : {30.0f, 1e-20f, 1e10f}) {
    PrefillCase c{"scaled inputs", {1, 2, 64, 64}, {1, 1, 64, 64}, cfg(32, 32)};
    c.scale = s;
    cases.push_back(c);
    c.cfg.compute.fp32_dest_acc_en = true;
    cases.push_back(c);
  }
  PrefillCase one{"scale 1", {1, 1, 64, 32}, {1, 1, 64, 32}, cfg(32, 32, false)};
  one.cfg.scale = 1.0f;
  one.scale = 4.0f;
  cases.push_back(one);
  for (const PrefillCase& c : cases) expect_fast_equals_oracle(c);
  // Equal scores (Q zero): every row is the running mean of V's rows.
  const TileTensor q = to_tile_layout(std::vector<float>(64 * 32, 0.0f).data(), {1, 1, 64, 32}, DataFormat::Bfloat16);
  const TileTensor k = tiles({1, 1, 64, 32}, 4, DataFormat::Bfloat16), v = tiles({1, 1, 64, 32}, 5, DataFormat::Bfloat16);
  TileTensor want, got;
  tt_sdpa_oracle(q, k, v, nullptr, want, cfg(32, 32));
  for (simd::Isa isa : simd::vector_isas()) {
    tt_sdpa(q, k, v, nullptr, got, cfg(32, 32), Exec{isa, nullptr});
    EXPECT_TRUE(same_bits(got, want));
  }
  // Row 0 sees key 0 only: V's row 0 times p * (1/p) for p = exp(0) in fast
  // approx mode and the approximate reciprocal, packed to bf16 steps, so
  // within a few percent of V's row (not exactly: the device is not).
  for (int64_t c = 0; c < 32; ++c) EXPECT_NEAR(want.at(0, 0, c), v.at(0, 0, c), 0.05 * std::fabs(v.at(0, 0, c)) + 1e-6);
}

// The scale as the reader writes it: the float's top 16 bits.
TEST(TtsimSdpa, ScaleIsTruncatedToBf16) {
  SdpaConfig c;
  EXPECT_EQ(sdpa_scale_bf16(c, 64), 0.125f);
  const float s = 1.0f / std::sqrt(128.0f);  // 0x3db504f3
  uint32_t u;
  const float t = sdpa_scale_bf16(c, 128);
  std::memcpy(&u, &t, 4);
  EXPECT_EQ(u, 0x3db50000u) << s;
  c.scale = 0.1f;  // 0x3dcccccd: truncation gives 0x3dcc, rounding would give 0x3dcd
  const float t2 = sdpa_scale_bf16(c, 64);
  std::memcpy(&u, &t2, 4);
  EXPECT_EQ(u, 0x3dcc0000u);
}

TEST(TtsimSdpa, RefusesWhatTheOpDoesNotTake) {
  const Shape q{1, 4, 64, 64}, kv{1, 2, 64, 64};
  EXPECT_EQ(sdpa_problem(q, kv, kv, nullptr, cfg(32, 32)), "");
  EXPECT_NE(sdpa_problem(q, Shape{1, 3, 64, 64}, Shape{1, 3, 64, 64}, nullptr, cfg(32, 32)).find("multiple of nkv"),
            std::string::npos);
  EXPECT_NE(sdpa_problem(q, kv, kv, nullptr, cfg(48, 32)).find("q_chunk_size: expected a positive multiple of 32"),
            std::string::npos);
  EXPECT_NE(sdpa_problem(q, kv, kv, nullptr, cfg(128, 32)).find("does not divide"), std::string::npos);
  EXPECT_NE(sdpa_problem(q, Shape{1, 2, 96, 64}, Shape{1, 2, 96, 64}, nullptr, cfg(32, 32)).find("causal"),
            std::string::npos);
  const Shape m{1, 1, 64, 64};
  EXPECT_NE(sdpa_problem(q, kv, kv, &m, cfg(32, 32)).find("is_causal=false"), std::string::npos);
  EXPECT_EQ(sdpa_problem(q, kv, kv, &m, cfg(32, 32, false)), "");
  const Shape bad{1, 2, 64, 64};
  EXPECT_NE(sdpa_problem(q, kv, kv, &bad, cfg(32, 32, false)).find("expected MASK"), std::string::npos);
  EXPECT_NE(sdpa_problem(Shape{4, 64, 64}, kv, kv, nullptr, cfg(32, 32)).find("4-D"), std::string::npos);
}

// sliding_window_size and attention_sink (tt-metal's later SDPA, grafted on
// the emulated kernel's arithmetic): fast path = oracle bit for bit, with
// windows narrower than, equal to and wider than a chunk, causal and not,
// chunks the window misses entirely (their mask is all -inf), GQA and both
// Dst modes; sinks below, near and far above the scores.
TEST(TtsimSdpa, FastEqualsOracleWithSlidingWindowAndSink) {
  std::vector<PrefillCase> cases;
  for (int64_t w : {1, 17, 32, 64, 100})
    for (bool causal : {true, false}) {
      PrefillCase c{"window", {1, 2, 128, 64}, {1, 1, 128, 64}, cfg(32, 32, causal)};
      c.cfg.sliding_window_size = w;
      cases.push_back(c);
    }
  PrefillCase wide{"window, q 64 k 32, fp32 Dst", {1, 2, 192, 64}, {1, 2, 192, 64}, cfg(64, 32)};
  wide.cfg.sliding_window_size = 40;
  wide.cfg.compute.fp32_dest_acc_en = true;
  cases.push_back(wide);
  for (float s : {-30.0f, 0.5f, 3.0f, 200.0f})
    for (bool fp32 : {false, true}) {
      PrefillCase c{"sink", {1, 4, 96, 32}, {1, 2, 96, 32}, cfg(32, 32)};
      c.cfg.attention_sink = {s, -s, 2 * s, 0.0f};
      c.cfg.compute.fp32_dest_acc_en = fp32;
      cases.push_back(c);
    }
  PrefillCase both{"window and sink, exact rescale", {2, 2, 128, 64}, {2, 2, 128, 64}, cfg(32, 64)};
  both.cfg.sliding_window_size = 48;
  both.cfg.attention_sink = {1.0f, 4.0f};
  both.cfg.exp_approx_mode = false;
  cases.push_back(both);
  for (const PrefillCase& c : cases) expect_fast_equals_oracle(c);
}

// A window of one key: every query sees itself only, so the output is V's
// row (times p / p, within the approx exp and reciprocal's few percent); a
// window covering the sequence changes nothing against plain causal SDPA.
TEST(TtsimSdpa, SlidingWindowBounds) {
  const TileTensor q = tiles({1, 1, 64, 32}, 1, DataFormat::Bfloat16), k = tiles({1, 1, 64, 32}, 2, DataFormat::Bfloat16),
                   v = tiles({1, 1, 64, 32}, 3, DataFormat::Bfloat16);
  SdpaConfig one = cfg(32, 32);
  one.sliding_window_size = 1;
  TileTensor out;
  tt_sdpa_oracle(q, k, v, nullptr, out, one);
  for (int64_t r : {0, 31, 32, 63})
    for (int64_t c = 0; c < 32; ++c) EXPECT_NEAR(out.at(0, r, c), v.at(0, r, c), 0.05 * std::fabs(v.at(0, r, c)) + 1e-6);
  SdpaConfig all = cfg(32, 32);
  all.sliding_window_size = 64;
  TileTensor a, b;
  tt_sdpa_oracle(q, k, v, nullptr, a, all);
  tt_sdpa_oracle(q, k, v, nullptr, b, cfg(32, 32));
  // Every chunk now gets a mask, all zeros inside the window: adding a
  // zero to a bf16 score is exact, so the bits do not change.
  EXPECT_TRUE(same_bits(a, b));
  std::vector<float> mrow(8);
  sdpa_mask_row(one, 5, 0, 8, mrow.data());
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(std::isinf(mrow[c]), c != 5) << c;
  SdpaConfig nc = cfg(32, 32, false);
  nc.sliding_window_size = 4;  // [q - 2, q + 2]
  sdpa_mask_row(nc, 5, 0, 8, mrow.data());
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(std::isinf(mrow[c]), c < 3 || c > 7) << c;
}

TEST(TtsimSdpa, RefusesBadWindowOrSink) {
  const Shape q{1, 4, 64, 64}, kv{1, 2, 64, 64}, m{1, 1, 64, 64};
  SdpaConfig c = cfg(32, 32, false);
  c.sliding_window_size = -1;
  EXPECT_NE(sdpa_problem(q, kv, kv, nullptr, c).find("sliding_window_size"), std::string::npos);
  c.sliding_window_size = 8;
  EXPECT_NE(sdpa_problem(q, kv, kv, &m, c).find("the window is the mask"), std::string::npos);
  c.sliding_window_size = 0;
  c.attention_sink = {1.0f, 2.0f};
  EXPECT_NE(sdpa_problem(q, kv, kv, nullptr, c).find("one value per query head (4)"), std::string::npos);
}

// reduce_c MAX is one step both the fast path and the oracle share, so it is
// pinned here to its rule, the scalar x > m ? x : m from m = -inf in row
// order: NaN never wins, and of +0 and -0 the first seen stays.
TEST(TtsimSdpa, RowMaxKeepsTheScalarRuleOnLanes) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> pick(0, 9);
  std::normal_distribution<float> nd;
  const float specials[] = {0.0f, -0.0f, -INFINITY, INFINITY, NAN, -NAN};
  for (int it = 0; it < 4000; ++it) {
    const int64_t n = 8 * (1 + it % 40) + (it % 7 == 0 ? 3 : 0);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = pick(rng) < 4 ? specials[pick(rng) % 6] : (it % 3 ? -std::fabs(nd(rng)) : nd(rng));
    float want = -INFINITY;
    for (float v : x) want = v > want ? v : want;
    const float got = sdpa_row_max(x.data(), n);
    uint32_t a, b;
    std::memcpy(&a, &got, 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "row " << it << " of " << n;
  }
}
