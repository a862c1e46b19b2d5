// SDPA prefill at tt_metal latest with an fp32 Dst (compute_common.hpp's
// sdpa_standard, src/backends/ttsim/ops/sdpa/sdpa_standard.h): the fast path
// bit for bit against the oracle on every instruction set this CPU runs, 1
// and 3 threads, across program configs, formats, masks, architectures and
// edge values; hand-derived values of the oracle; the op end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

SdpaConfig latest_fp32(int64_t qc = 32, int64_t kc = 32) {
  SdpaConfig c;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.compute.fp32_dest_acc_en = true;
  c.compute.tt_metal = TtMetal::Latest;
  return c;
}

struct StandardCase {
  std::string name;
  Shape q, kv;
  SdpaConfig cfg;
  DataFormat fq = DataFormat::Bfloat16, fkv = DataFormat::Bfloat16;
  DataFormat fmask = DataFormat::Bfloat16;
  bool mask = false;
  float scale = 1.0f;  // of Q's and K's values
};

TileTensor half_masked(const Shape& q, const Shape& kv, DataFormat f) {
  const Shape ms{q[0], 1, q[2], kv[2]};
  std::vector<float> mv(static_cast<size_t>(shape_numel(ms)));
  std::mt19937 g(7);
  for (float& x : mv) x = (g() & 1) ? -1e9f : 0.0f;
  return to_tile_layout(mv.data(), ms, f);
}

// Returns the oracle's output after checking every fast path against it.
TileTensor expect_fast_equals_oracle(const StandardCase& c) {
  const TileTensor q = tiles(c.q, 1, c.fq, c.scale), k = tiles(c.kv, 2, c.fkv, c.scale), v = tiles(c.kv, 3, c.fkv);
  const TileTensor m = c.mask ? half_masked(c.q, c.kv, c.fmask) : TileTensor{};
  const TileTensor* mp = c.mask ? &m : nullptr;
  TileTensor want;
  tt_sdpa_standard_oracle(q, k, v, mp, want, c.cfg);
  static ThreadPool three(3);  // results never depend on the thread count
  for (simd::Isa isa : simd::vector_isas())
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
      TileTensor got;
      tt_sdpa_standard(q, k, v, mp, got, c.cfg, Exec{isa, pool});
      EXPECT_TRUE(same_bits(got, want)) << c.name << " on " << simd::isa_name(isa) << (pool ? ", 3 threads" : "");
    }
  return want;
}

}  // namespace

TEST(SdpaStandard, FastEqualsOracleAcrossProgramConfigs) {
  for (auto [qc, kc] : {std::pair<int64_t, int64_t>{32, 32}, {64, 32}, {32, 64}, {128, 64}, {64, 128}})
    for (bool causal : {true, false}) {
      StandardCase c{"q" + std::to_string(qc) + " k" + std::to_string(kc) + (causal ? " causal" : ""), {1, 2, 256, 64},
             {1, 2, 256, 64}, latest_fp32(qc, kc)};
      c.cfg.is_causal = causal;
      expect_fast_equals_oracle(c);
    }
}

TEST(SdpaStandard, FastEqualsOracleAcrossShapesMasksAndFormats) {
  std::vector<StandardCase> cs;
  cs.push_back({"gqa dh 128 batch 2", {2, 4, 128, 128}, {2, 2, 128, 128}, latest_fp32(64, 32)});
  cs.push_back({"mqa dh 32", {1, 4, 96, 32}, {1, 1, 96, 32}, latest_fp32()});
  cs.push_back({"dh 40 (padded)", {1, 2, 64, 40}, {1, 2, 64, 40}, latest_fp32()});
  StandardCase longer{"K longer than Q", {1, 2, 64, 64}, {1, 2, 192, 64}, latest_fp32(32, 64)};
  longer.cfg.is_causal = false;
  cs.push_back(longer);
  for (DataFormat fm : {DataFormat::Bfloat16, DataFormat::Bfp4_b}) {
    StandardCase m{std::string("mask ") + format_name(fm), {1, 2, 128, 64}, {1, 2, 128, 64}, latest_fp32(64, 32)};
    m.cfg.is_causal = false;
    m.mask = true;
    m.fmask = fm;
    cs.push_back(m);
  }
  for (DataFormat f : {DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    StandardCase b{std::string("inputs ") + format_name(f), {1, 2, 128, 64}, {1, 2, 128, 64}, latest_fp32(64, 64)};
    b.fq = b.fkv = f;
    cs.push_back(b);
  }
  for (DataFormat out : {DataFormat::Bfp8_b, DataFormat::Float32})
    for (bool precise : {false, true}) {
      StandardCase o{std::string("output ") + format_name(out) + (precise ? " precise" : ""), {1, 1, 64, 64}, {1, 1, 64, 64},
             latest_fp32()};
      o.cfg.compute.output = out;
      o.cfg.compute.bfp8_pack_precise = precise;
      cs.push_back(o);
    }
  for (const StandardCase& c : cs) expect_fast_equals_oracle(c);
}

// Lengths padded to whole chunks (the factory's padded_Sq / padded_Sk) and
// partial last tiles: causal, and non-causal with the generated padding
// mask on the last k chunk (whole padded tiles after the partial one too).
TEST(SdpaStandard, FastEqualsOracleOnPaddedLengths) {
  std::vector<StandardCase> cs;
  cs.push_back({"padded causal", {1, 2, 160, 64}, {1, 2, 160, 64}, latest_fp32(64, 128)});
  cs.push_back({"partial causal", {1, 2, 70, 64}, {1, 2, 70, 64}, latest_fp32(32, 64)});
  for (const auto& [name, q, kv, qc, kc] :
       {std::tuple<const char*, Shape, Shape, int64_t, int64_t>{"padded", {1, 2, 96, 64}, {1, 2, 224, 64}, 64, 128},
        {"partial", {1, 2, 70, 64}, {1, 2, 100, 64}, 64, 64},
        {"partial + padded tiles", {2, 2, 50, 32}, {2, 1, 40, 32}, 32, 128}}) {
    StandardCase c{name, q, kv, latest_fp32(qc, kc)};
    c.cfg.is_causal = false;
    cs.push_back(c);
  }
  // A given mask over partial last tiles: its tile padding joins the
  // softmax (tt-metal #54833), then whole -inf tiles (100 keys in 128).
  for (DataFormat fm : {DataFormat::Bfloat16, DataFormat::Bfp4_b}) {
    StandardCase c{std::string("partial + mask ") + format_name(fm), {1, 2, 70, 64}, {1, 2, 100, 64},
                   latest_fp32(64, 128)};
    c.cfg.is_causal = false;
    c.mask = true;
    c.fmask = fm;
    cs.push_back(c);
  }
  for (const StandardCase& c : cs) expect_fast_equals_oracle(c);
}

// A given mask over a partial last key tile gives the bits of the same
// kernel on the keys the tile pads made explicit (K's and V's zero rows,
// the mask's columns of 0): the reader fills -inf only on whole padded
// tiles, as on the streaming kernel.
TEST(SdpaStandard, PaddedKeysUnderAGivenMaskJoinTheSoftmax) {
  const TileTensor q = tiles({1, 2, 197, 64}, 41, DataFormat::Bfloat16), k = tiles({1, 1, 197, 64}, 42, DataFormat::Bfloat16),
                   v = tiles({1, 1, 197, 64}, 43, DataFormat::Bfloat16), mask = tiles({1, 1, 197, 197}, 44, DataFormat::Bfloat16);
  SdpaConfig c = latest_fp32(32, 64);
  c.is_causal = false;
  const TileTensor mask224 = zero_extended(mask, 197, 224);
  TileTensor got, want;
  tt_sdpa_standard(q, k, v, &mask, got, c, Exec{});
  tt_sdpa_standard(q, zero_extended(k, 224, 64), zero_extended(v, 224, 64), &mask224, want, c, Exec{});
  EXPECT_TRUE(same_bits(got, want));
}

// A float32 Q enters the QK matmul as TF32 (the unpacker with an fp32 Dst):
// fast path and oracle agree, the low 13 mantissa bits never matter, bit 13
// does.
TEST(SdpaStandard, Float32QIsTf32) {
  for (DataFormat out : {DataFormat::Bfloat16, DataFormat::Float32}) {
    StandardCase c{std::string("float32 Q -> ") + format_name(out), {1, 2, 96, 64}, {1, 1, 96, 64}, latest_fp32(32, 64)};
    c.fq = DataFormat::Float32;
    c.fkv = DataFormat::Bfp8_b;
    c.cfg.compute.output = out;
    expect_fast_equals_oracle(c);
  }
  const TileTensor q = tiles({1, 1, 64, 64}, 41, DataFormat::Float32), k = tiles({1, 1, 64, 64}, 42, DataFormat::Bfloat16);
  auto flip = [&](uint32_t bits) {
    TileTensor t = q;
    for (float& x : t.data) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      if (u != 0) u ^= bits;
      std::memcpy(&x, &u, 4);
    }
    return t;
  };
  TileTensor want, low, high;
  SdpaConfig hifi4 = latest_fp32();  // every Src bit reaches the product
  hifi4.compute.math_fidelity = MathFidelity::HiFi4;
  tt_sdpa_standard_oracle(q, k, k, nullptr, want, hifi4);
  tt_sdpa_standard_oracle(flip(0x1fffu), k, k, nullptr, low, hifi4);
  tt_sdpa_standard_oracle(flip(0x2000u), k, k, nullptr, high, hifi4);
  EXPECT_TRUE(same_bits(low, want));
  EXPECT_FALSE(same_bits(high, want));
}


// The padding mask does what a given mask of 0 / -inf at the first padded
// key does (the same ELWADD onto TF32 scores), and padded query rows never
// reach the valid ones, causal or not.
TEST(SdpaStandard, PaddedKeysAreMaskedAndPaddedRowsDropped) {
  const TileTensor q = tiles({1, 2, 64, 64}, 21, DataFormat::Bfloat16), k = tiles({1, 1, 64, 64}, 22, DataFormat::Bfp8_b),
                   v = tiles({1, 1, 64, 64}, 23, DataFormat::Bfloat16);
  const TileTensor mask = key_mask(64, 64, 40, DataFormat::Bfloat16);
  for (int64_t kc : {32, 64}) {
    SdpaConfig c = latest_fp32(32, kc);
    c.is_causal = false;
    TileTensor want, got;
    tt_sdpa_standard_oracle(q, k, v, &mask, want, c);
    tt_sdpa_standard_oracle(q, first_rows(k, 40), first_rows(v, 40), nullptr, got, c);
    EXPECT_TRUE(same_bits(got, want)) << "k chunk " << kc;
  }
  const TileTensor q70 = tiles({1, 2, 70, 64}, 24, DataFormat::Bfloat16), k70 = tiles({1, 1, 70, 64}, 25, DataFormat::Bfloat16);
  for (bool causal : {true, false}) {
    SdpaConfig c = latest_fp32(32, 32);
    c.is_causal = causal;
    TileTensor full, head;
    tt_sdpa_standard_oracle(q70, k70, k70, nullptr, full, c);
    const TileTensor k64 = causal ? first_rows(k70, 64) : k70;
    tt_sdpa_standard_oracle(first_rows(q70, 64), k64, k64, nullptr, head, c);
    EXPECT_TRUE(same_bits(first_rows(full, 64), head)) << "causal " << causal;
  }
}

TEST(SdpaStandard, FastEqualsOracleAcrossComputeConfigsAndArchitectures) {
  for (MathFidelity f : {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi3, MathFidelity::HiFi4})
    for (bool approx : {true, false})
      for (bool exp_approx : {true, false})
        for (Arch a : {Arch::Wormhole, Arch::Blackhole}) {
          StandardCase c{std::string(fidelity_name(f)) + (approx ? " approx " : " exact ") +
                     (exp_approx ? "exp_approx " : "exp_poly ") + arch_name(a),
                 {1, 2, 128, 64}, {1, 2, 128, 64}, latest_fp32(64, 32)};
          c.cfg.compute.math_fidelity = f;
          c.cfg.compute.math_approx_mode = approx;
          c.cfg.exp_approx_mode = exp_approx;
          c.cfg.compute.arch = a;
          expect_fast_equals_oracle(c);
        }
}

// Scores far outside exp's range (the fast exp's unclamped inputs, zeroed
// by packer ReLU), flushed products and overflowing sums.
TEST(SdpaStandard, FastEqualsOracleOnEdgeValues) {
  for (float s : {30.0f, 1e-20f, 1e10f}) {
    StandardCase c{"inputs x " + std::to_string(s), {1, 2, 128, 64}, {1, 2, 128, 64}, latest_fp32(64, 32)};
    c.scale = s;
    const TileTensor out = expect_fast_equals_oracle(c);
    int64_t finite = 0;
    for (float x : out.data) finite += std::isfinite(x);
    EXPECT_EQ(finite, static_cast<int64_t>(out.data.size())) << c.name;
  }
}

// Hand-derived: with Q = 0 every visible score is 0, every exp the same
// e0 = fast-exp(0), so each output row is the mean of the visible V rows:
// row 0 (causal) sees only V row 0 and a constant V gives that constant,
// within one bf16 step with HiFi4 and the exact reciprocal (approx mode's
// 1/ln2-seeded reciprocal with one Newton step is ~3% off by design).
TEST(SdpaStandard, ZeroScoresAverageTheVisibleValues) {
  const Shape s{1, 1, 64, 32};
  std::vector<float> zeros(static_cast<size_t>(shape_numel(s)), 0.0f), half(zeros.size(), 0.5f);
  const TileTensor q = to_tile_layout(zeros.data(), s, DataFormat::Bfloat16), k = tiles(s, 4, DataFormat::Bfloat16);
  const TileTensor v = tiles(s, 5, DataFormat::Bfloat16), vc = to_tile_layout(half.data(), s, DataFormat::Bfloat16);
  TileTensor out;
  SdpaConfig cfg = latest_fp32();
  cfg.compute.math_fidelity = MathFidelity::HiFi4;
  cfg.compute.math_approx_mode = false;
  tt_sdpa_standard_oracle(q, k, vc, nullptr, out, cfg);
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 32; ++c) EXPECT_NEAR(out.at(0, r, c), 0.5f, 0.5f / 128) << r << "," << c;
  tt_sdpa_standard_oracle(q, k, v, nullptr, out, cfg);
  for (int64_t c = 0; c < 32; ++c) EXPECT_NEAR(out.at(0, 0, c), v.at(0, 0, c), std::fabs(v.at(0, 0, c)) / 64) << c;
  // Row 5 sees rows 0..5 with equal weights.
  for (int64_t c = 0; c < 32; ++c) {
    double mean = 0;
    for (int64_t r = 0; r <= 5; ++r) mean += v.at(0, r, c) / 6.0;
    EXPECT_NEAR(out.at(0, 5, c), mean, 0.02) << c;
  }
}

// Against float64 attention of the same (bf16) inputs, with the bound
// tt-metal's SDPA tests assert (PCC >= 0.994) and a max error that a wrong
// step (an unscaled exp, a lost chunk, a bf16 sum) would exceed; the
// scores' fast approx exp (Schraudolph, a few % per weight) dominates.
TEST(SdpaStandard, TracksFloat64Attention) {
  const Shape s{1, 2, 256, 64};
  const TileTensor q = tiles(s, 11, DataFormat::Bfloat16), k = tiles(s, 12, DataFormat::Bfloat16),
                   v = tiles(s, 13, DataFormat::Bfloat16);
  for (bool exp_approx : {true, false}) {
  TileTensor out;
  SdpaConfig cfg = latest_fp32(64, 32);
  cfg.compute.math_fidelity = MathFidelity::HiFi4;
  cfg.compute.math_approx_mode = false;
  cfg.exp_approx_mode = exp_approx;  // exp(m_old - m_new): accurate, or the degree-4 polynomial
  tt_sdpa_standard_oracle(q, k, v, nullptr, out, cfg);
  double sxy = 0, sxx = 0, syy = 0, sx = 0, sy = 0, maxerr = 0;
  int64_t n = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 256; ++r) {
      std::vector<double> w(static_cast<size_t>(r + 1));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= r; ++j) {
        double d = 0;
        for (int64_t c = 0; c < 64; ++c) d += static_cast<double>(q.at(h, r, c)) * k.at(h, j, c);
        w[static_cast<size_t>(j)] = d / 8.0;
        mx = std::max(mx, d / 8.0);
      }
      for (double& x : w) sum += x = std::exp(x - mx);
      for (int64_t c = 0; c < 64; ++c) {
        double ref = 0;
        for (int64_t j = 0; j <= r; ++j) ref += w[static_cast<size_t>(j)] / sum * v.at(h, j, c);
        const double got = out.at(h, r, c);
        maxerr = std::max(maxerr, std::fabs(got - ref));
        sx += got, sy += ref, sxx += got * got, syy += ref * ref, sxy += got * ref, ++n;
      }
    }
  const double pcc = (n * sxy - sx * sy) / std::sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
  EXPECT_GT(pcc, 0.994) << exp_approx;
  EXPECT_LT(maxerr, 0.05) << exp_approx;
  }
}

// The attention sink (one bf16 logit per query head, compared with the
// unscaled scores and scaled in the exp as they are): fast path and oracle
// agree, a sink far below every score changes only the rounding of the sum
// (l * alpha with alpha = 1 still passes the multiplier: any two such sinks
// give the same bits, within 2^-6 of no sink), and the result tracks
// float64 attention with the sink as one more key of logit sink * scale
// and no value.
TEST(SdpaStandard, AttentionSink) {
  for (bool causal : {true, false}) {
    StandardCase c{std::string("sink") + (causal ? " causal" : ""), {1, 4, 96, 64}, {1, 2, 96, 64}, latest_fp32(32, 64)};
    c.cfg.is_causal = causal;
    c.cfg.attention_sink = {0.5f, -3.0f, 12.0f, 40.0f};
    expect_fast_equals_oracle(c);
  }
  const Shape s{1, 2, 128, 64};
  const TileTensor q = tiles(s, 51, DataFormat::Bfloat16), k = tiles(s, 52, DataFormat::Bfloat16),
                   v = tiles(s, 53, DataFormat::Bfloat16);
  SdpaConfig cfg = latest_fp32(32, 64);
  cfg.compute.math_fidelity = MathFidelity::HiFi4;
  cfg.compute.math_approx_mode = false;
  TileTensor plain, far, farther;
  tt_sdpa_standard_oracle(q, k, v, nullptr, plain, cfg);
  SdpaConfig low = cfg;
  low.attention_sink = {-0x1p60f, -0x1p70f};
  tt_sdpa_standard_oracle(q, k, v, nullptr, far, low);
  low.attention_sink = {-0x1p99f, -0x1p99f};
  tt_sdpa_standard_oracle(q, k, v, nullptr, farther, low);
  EXPECT_TRUE(same_bits(far, farther));
  for (size_t i = 0; i < plain.data.size(); ++i)
    ASSERT_LE(std::fabs(far.data[i] - plain.data[i]), std::fabs(plain.data[i]) / 64) << i;
  SdpaConfig sunk = cfg;
  sunk.attention_sink = {8.0f, 24.0f};  // unscaled: logits 1 and 3
  TileTensor out;
  tt_sdpa_standard_oracle(q, k, v, nullptr, out, sunk);
  double maxerr = 0, shrink = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 128; ++r) {
      std::vector<double> w(static_cast<size_t>(r + 1));
      double mx = sunk.attention_sink[static_cast<size_t>(h)] / 8.0, sum = 0;
      for (int64_t j = 0; j <= r; ++j) {
        double d = 0;
        for (int64_t c = 0; c < 64; ++c) d += static_cast<double>(q.at(h, r, c)) * k.at(h, j, c);
        mx = std::max(mx, w[static_cast<size_t>(j)] = d / 8.0);
      }
      for (double& x : w) sum += x = std::exp(x - mx);
      sum += std::exp(sunk.attention_sink[static_cast<size_t>(h)] / 8.0 - mx);
      for (int64_t c = 0; c < 64; ++c) {
        double ref = 0;
        for (int64_t j = 0; j <= r; ++j) ref += w[static_cast<size_t>(j)] / sum * v.at(h, j, c);
        maxerr = std::max(maxerr, std::fabs(double(out.at(h, r, c)) - ref));
        shrink = std::max(shrink, double(std::fabs(plain.at(h, r, c) - out.at(h, r, c))));
      }
    }
  EXPECT_LT(maxerr, 0.05);
  EXPECT_GT(shrink, 0.1);  // the sink moved the output well beyond that error
}

TEST(SdpaStandard, RefusesWhatItDoesNotModel) {
  const TileTensor t = tiles({1, 1, 64, 64}, 1, DataFormat::Bfloat16);
  TileTensor out;
  SdpaConfig w = latest_fp32();
  w.sliding_window_size = 32;
  w.is_causal = false;  // a causal window runs (tests/ttsim/sdpa_latest_window_test.cpp)
  for (const SdpaConfig& c : {w}) {
    try {
      tt_sdpa_standard_oracle(t, t, t, nullptr, out, c);
      FAIL() << "ran";
    } catch (const InputError& err) {
      EXPECT_NE(std::string(err.what()).find("is not modelled at tt_metal latest with fp32_dest_acc_en"),
                std::string::npos)
          << err.what();
    }
  }
}

// `mha op sdpa --option tt_metal=latest --fp32-dest-acc-en`: the device
// operation runs this kernel (the oracle's bits), keys its program on the
// profile and says which flag the kernel inverts.
TEST(SdpaStandard, OpCliBitForBitWithTheOracle) {
  test::TempDir dir;
  const Shape s{1, 2, 128, 64};
  const std::vector<float> qv = normal(shape_numel(s), 21), kv = normal(shape_numel(s), 22), vv = normal(shape_numel(s), 23);
  const char* names[] = {"q.npy", "k.npy", "v.npy"};
  const std::vector<float>* vals[] = {&qv, &kv, &vv};
  std::string in;
  for (int i = 0; i < 3; ++i) {
    io::write_npy(dir.file(names[i]), Tensor::from_f32(s, *vals[i]));
    in += " " + test::shell_quote(dir.file(names[i]));
  }
  const test::CommandResult r =
      test::run_mha("op sdpa" + in + " -o " + test::shell_quote(dir.file("o.npy")) +
                    " --fp32-dest-acc-en --option tt_metal=latest --option q_chunk_size=64 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tt_metal"]["profile"], "latest");
  EXPECT_NE(j["programs"][0].get<std::string>().find("tt_metal=latest"), std::string::npos);
  ASSERT_EQ(j["notes"].size(), 1u);
  SdpaConfig cfg = latest_fp32(64, 32);
  TileTensor want;
  tt_sdpa_standard_oracle(to_tile_layout(qv.data(), s, DataFormat::Bfloat16),
                          to_tile_layout(kv.data(), s, DataFormat::Bfloat16),
                          to_tile_layout(vv.data(), s, DataFormat::Bfloat16), nullptr, want, cfg);
  const Tensor got = io::read_tensor(dir.file("o.npy")), w = to_tensor(want);
  ASSERT_EQ(got.numel(), w.numel());
  EXPECT_EQ(std::memcmp(got.data<float>(), w.data<float>(), static_cast<size_t>(got.numel()) * 4), 0);
  // Every instruction set through the `kernels` option, 1 and 3 threads: the same bits.
  std::vector<std::string> isas = {"scalar"};
  for (simd::Isa i : simd::vector_isas()) isas.push_back(simd::isa_name(i));
  for (const std::string& isa : isas)
    for (int threads : {1, 3}) {
      const test::CommandResult ri = test::run_mha(
          "op sdpa" + in + " -o " + test::shell_quote(dir.file("i.npy")) +
          " --fp32-dest-acc-en --option tt_metal=latest --option q_chunk_size=64 --option kernels=" + isa +
          " --option threads=" + std::to_string(threads));
      ASSERT_EQ(ri.exit_code, 0) << isa << ri.err;
      const Tensor gi = io::read_tensor(dir.file("i.npy"));
      EXPECT_EQ(std::memcmp(gi.data<float>(), w.data<float>(), static_cast<size_t>(w.numel()) * 4), 0) << isa;
    }
}
