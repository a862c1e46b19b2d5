// SDPA prefill by the streaming kernel (sdpa_streaming.h): the fast path bit
// for bit against the oracle (every instruction set this CPU runs, 1 and 3
// threads, Wormhole and Blackhole, program configs, formats, masks, padded
// lengths, edge values), the lane steps, attention in float64 within
// tt-metal's PCC bound, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ttsim_options.h"
#include "compare/compare.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/sfpu.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

struct StreamingCase {
  const char* name;
  Shape q, kv;
  SdpaConfig cfg;
  DataFormat fq = DataFormat::Bfloat16, fkv = DataFormat::Bfloat16;
  DataFormat fmask = DataFormat::Bfloat16;
  bool mask = false, masked_row = false;
  float scale = 1.0f;  // of Q's and K's values
};

SdpaConfig chunks(int64_t qc, int64_t kc, bool causal = true) {
  SdpaConfig c;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.is_causal = causal;
  return c;
}

// Half the keys of every row masked with -1e9 (tt-metal's test mask); with
// masked_row, query row 5 sees no key at all (-inf everywhere).
TileTensor make_mask(const StreamingCase& c) {
  const Shape ms{c.q[0], 1, c.q[2], c.kv[2]};
  std::vector<float> mv(static_cast<size_t>(shape_numel(ms)));
  std::mt19937 g(7);
  for (float& x : mv) x = (g() & 1) ? -1e9f : 0.0f;
  if (c.masked_row)
    for (int64_t j = 0; j < c.kv[2]; ++j) mv[static_cast<size_t>(5 * c.kv[2] + j)] = -std::numeric_limits<float>::infinity();
  return to_tile_layout(mv.data(), ms, c.fmask);
}

void expect_fast_equals_oracle(const StreamingCase& c) {
  const TileTensor q = tiles(c.q, 1, c.fq, c.scale), k = tiles(c.kv, 2, c.fkv, c.scale), v = tiles(c.kv, 3, c.fkv);
  const TileTensor m = c.mask ? make_mask(c) : TileTensor{};
  const TileTensor* mp = c.mask ? &m : nullptr;
  for (Arch arch : {Arch::Wormhole, Arch::Blackhole}) {
    SdpaConfig cf = c.cfg;
    cf.compute.arch = arch;
    TileTensor want;
    tt_sdpa_streaming_oracle(q, k, v, mp, want, cf);
    static ThreadPool three(3);  // results never depend on the thread count
    for (simd::Isa isa : simd::vector_isas())
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
        TileTensor got;
        tt_sdpa_streaming(q, k, v, mp, got, cf, Exec{isa, pool});
        EXPECT_TRUE(same_bits(got, want)) << c.name << " on " << simd::isa_name(isa) << ", " << arch_name(arch);
      }
    double norm = 0;
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t col = 0; col < want.cols; ++col)
        if (!c.masked_row || r != 5) norm += std::fabs(want.at(0, r, col));
    EXPECT_TRUE(std::isfinite(norm)) << c.name;
    EXPECT_GT(norm, 0.0) << c.name;
  }
}

// Attention in float64 on the inputs' values: softmax((q k^T + mask) * scale) v,
// mask (b, 1, s, s_k) or none: the kernel adds a mask to the unscaled scores
// (TT-NN's op multiplies it by 1 / scale first).
std::vector<double> attention_f64(const TileTensor& q, const TileTensor& k, const TileTensor& v, bool causal,
                                  double scale, const TileTensor* mask = nullptr) {
  const int64_t B = q.shape[0], H = q.shape[1], HK = k.shape[1], S = q.rows, SK = k.rows, D = q.cols;
  std::vector<double> out(static_cast<size_t>(B * H * S * D)), p(static_cast<size_t>(SK));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h, kh = b * HK + h / (H / HK);
      for (int64_t i = 0; i < S; ++i) {
        double mx = -1e300, sum = 0;
        const int64_t n = causal ? i + 1 : SK;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(q.at(bh, i, d)) * k.at(kh, j, d);
          p[static_cast<size_t>(j)] = (s + (mask ? mask->at(b, i, j) : 0.0)) * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        for (int64_t j = 0; j < n; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < n; ++j) o += p[static_cast<size_t>(j)] * v.at(kh, j, d);
          out[static_cast<size_t>((bh * S + i) * D + d)] = o / sum;
        }
      }
    }
  return out;
}

}  // namespace

// Every program the chunk sizes select, causal, and one non-causal: sbh 2
// (64/128), 4 (128/64), 1 with no split (32/256), TT-NN's default (32/32)
// and test_sdpa_tt_large_seq's 256/128; the split of the first row group's
// keys runs in "partial, sbh 1 split" below. GQA, head widths, padded and
// partial lengths. The other configs' sweep (label `numeric`) follows.
TEST(TtsimSdpaStreaming, FastEqualsOracleOnEveryProgram) {
  std::vector<StreamingCase> cases;
  for (auto [qc, kc] : {std::pair<int, int>{64, 128}, {128, 64}, {32, 256}, {32, 32}, {256, 128}})
    cases.push_back({"chunks", {1, 1, 256, 32}, {1, 1, 256, 32}, chunks(qc, kc, true)});
  cases.push_back({"chunks", {1, 1, 256, 32}, {1, 1, 256, 32}, chunks(64, 128, false)});
  cases.push_back({"gqa", {2, 4, 128, 64}, {2, 2, 128, 64}, chunks(64, 128)});
  cases.push_back({"dh40 dh128", {1, 1, 128, 40}, {1, 1, 128, 40}, chunks(64, 64)});
  cases.push_back({"dh128", {1, 1, 128, 128}, {1, 1, 128, 128}, chunks(64, 128, false)});
  // Lengths that are not multiples of the chunks: the kernel pads them.
  cases.push_back({"padded causal", {1, 2, 160, 64}, {1, 2, 160, 64}, chunks(64, 128)});
  cases.push_back({"padded", {1, 2, 96, 64}, {1, 2, 224, 64}, chunks(64, 128, false)});
  // A partial last tile: the causal diagonal hides the padded keys; the
  // non-causal kernel stamps the partial tile (4 and 8 valid columns), with
  // whole padded tiles after it (40 keys in a 128-key chunk).
  cases.push_back({"partial causal", {1, 2, 70, 64}, {1, 2, 70, 64}, chunks(32, 64)});
  cases.push_back({"partial", {1, 2, 70, 64}, {1, 2, 100, 64}, chunks(64, 64, false)});
  cases.push_back({"partial + padded tiles", {2, 2, 50, 32}, {2, 1, 40, 32}, chunks(32, 128, false)});
  cases.push_back({"partial, sbh 1 split", {1, 1, 33, 32}, {1, 1, 500, 32}, chunks(32, 512, false)});
  for (const StreamingCase& c : cases) expect_fast_equals_oracle(c);
}

// The rest of the program configs: the other chunkings non-causal, and the
// first row group's keys split in two (32/512) causal.
TEST(TtsimSdpaStreaming, FastEqualsOracleAcrossProgramConfigs) {
  std::vector<StreamingCase> cases;
  for (auto [qc, kc] : {std::pair<int, int>{128, 64}, {32, 256}, {32, 32}, {256, 128}})
    cases.push_back({"chunks", {1, 1, 256, 32}, {1, 1, 256, 32}, chunks(qc, kc, false)});
  cases.push_back({"chunks", {1, 1, 512, 32}, {1, 1, 512, 32}, chunks(32, 512, true)});
  for (const StreamingCase& c : cases) expect_fast_equals_oracle(c);
}

// A partial last tile, as the writer's partial tile masks it: 40 keys give
// the bits of 64 keys under a given mask that is 0 on the first 40 and -inf
// on the rest (stamped on every tile by the same L1 accumulation); padded
// query rows never reach the valid rows, causal or not.
TEST(TtsimSdpaStreaming, PartialLastTileIsMaskedAsTheWriterMasksIt) {
  const TileTensor q = tiles({1, 2, 64, 64}, 21, DataFormat::Bfloat16), k = tiles({1, 1, 64, 64}, 22, DataFormat::Bfp8_b),
                   v = tiles({1, 1, 64, 64}, 23, DataFormat::Bfloat16);
  const TileTensor mask = key_mask(64, 64, 40, DataFormat::Bfloat16);
  for (int64_t kc : {32, 64}) {
    TileTensor want, got;
    tt_sdpa_streaming_oracle(q, k, v, &mask, want, chunks(32, kc, false));
    tt_sdpa_streaming_oracle(q, first_rows(k, 40), first_rows(v, 40), nullptr, got, chunks(32, kc, false));
    EXPECT_TRUE(same_bits(got, want)) << "k chunk " << kc;
  }
  const TileTensor q70 = tiles({1, 2, 70, 64}, 24, DataFormat::Bfloat16), k70 = tiles({1, 1, 70, 64}, 25, DataFormat::Bfloat16);
  for (bool causal : {true, false}) {
    TileTensor full, head;
    tt_sdpa_streaming_oracle(q70, k70, k70, nullptr, full, chunks(32, 32, causal));
    const TileTensor k64 = causal ? first_rows(k70, 64) : k70;
    tt_sdpa_streaming_oracle(first_rows(q70, 64), k64, k64, nullptr, head, chunks(32, 32, causal));
    EXPECT_TRUE(same_bits(first_rows(full, 64), head)) << "causal " << causal;
  }
}

// A partial last key tile under a given mask, as 15a15bf5's reader and
// factory leave it (tt-metal #54833): the 27 keys past 197 (K's zero tile
// padding, V's zero rows, the mask's tile padding of 0) join the softmax.
// tt-sim gives the bits of the same kernel on 224 keys whose last 27 are
// those zeros made explicit, and the output follows float64 attention with
// those 27 keys (logit 0, V 0), not the one over the 197 keys. Nearly
// uniform scores (Q scaled by 0.05) give the padded keys 27/224 of the
// weight; test_sdpa_noncausal_randn_bias's draws (randn, a randn bias)
// about 5 %.
TEST(TtsimSdpaStreaming, PaddedKeysUnderAGivenMaskJoinTheSoftmax) {
  const int64_t s = 197, sp = 224;
  for (float qscale : {0.05f, 1.0f}) {
    const TileTensor q = tiles({1, 2, s, 64}, 41, DataFormat::Bfloat16, qscale),
                     k = tiles({1, 1, s, 64}, 42, DataFormat::Bfloat16), v = tiles({1, 1, s, 64}, 43, DataFormat::Bfloat16),
                     mask = tiles({1, 1, s, s}, 44, DataFormat::Bfloat16);
    const TileTensor kp = zero_extended(k, sp, 64), vp = zero_extended(v, sp, 64), mp = zero_extended(mask, s, sp);
    const SdpaConfig c = chunks(32, 32, false);  // TT-NN's defaults
    TileTensor got, explicit_keys;
    tt_sdpa_streaming(q, k, v, &mask, got, c, Exec{});
    tt_sdpa_streaming(q, kp, vp, &mp, explicit_keys, c, Exec{});
    EXPECT_TRUE(same_bits(got, explicit_keys)) << "Q scale " << qscale;
    const Tensor out = to_tensor(got);
    const Shape os{1, 2, s, 64};
    const auto vs = [&](const std::vector<double>& ref) {
      return compare::compare(Tensor::from_f64(os, ref), out, compare::Options{});
    };
    const compare::Report leak = vs(attention_f64(q, kp, vp, false, 0.125, &mp)),
                          exact = vs(attention_f64(q, k, v, false, 0.125, &mask));
    const double err_leak = leak.max_abs_diff->value, err_exact = exact.max_abs_diff->value;
    // PCC does not tell them apart (nearly uniform rows only shrink by
    // 197/224); the largest error does.
    EXPECT_GT(leak.pcc, 0.999) << "Q scale " << qscale;
    EXPECT_LT(err_leak, err_exact) << "Q scale " << qscale;
    if (qscale < 1.0f) {
      EXPECT_GT(err_exact, 4 * err_leak) << err_leak << " vs " << err_exact;
    }
  }
}

// Compute configs, formats and masks: each fidelity, both exp and
// reciprocal modes, each input and each output format, a float32 Q and
// both mask formats here; their other combinations (label `numeric`) below.
TEST(TtsimSdpaStreaming, FastEqualsOracleOnEachComputeConfigFormatAndMask) {
  std::vector<StreamingCase> cases;
  const MathFidelity fidelities[] = {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi4};
  for (int i = 0; i < 3; ++i) {
    StreamingCase c{"fidelity x exp x recip", {1, 1, 128, 64}, {1, 1, 128, 64}, chunks(64, 64)};
    c.cfg.compute.math_fidelity = fidelities[i];
    c.cfg.exp_approx_mode = i != 1;
    c.cfg.compute.math_approx_mode = i != 0;
    cases.push_back(c);
  }
  const DataFormat ins[] = {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b},
                   outs[] = {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Float32};
  for (int i = 0; i < 3; ++i) {
    StreamingCase c{"formats", {1, 1, 128, 64}, {1, 1, 128, 64}, chunks(64, 64)};
    c.fq = c.fkv = ins[i];
    c.cfg.compute.output = outs[(i + 1) % 3];
    cases.push_back(c);
  }
  for (DataFormat out : {DataFormat::Bfloat16, DataFormat::Float32}) {
    StreamingCase c{"float32 Q", {1, 2, 96, 64}, {1, 1, 96, 64}, chunks(32, 64)};
    c.fq = DataFormat::Float32;
    c.fkv = DataFormat::Bfp8_b;
    c.cfg.compute.output = out;
    cases.push_back(c);
  }
  for (DataFormat fm : {DataFormat::Bfloat16, DataFormat::Bfp4_b}) {
    StreamingCase c{"mask", {1, 2, 128, 64}, {1, 2, 192, 64}, chunks(64, 128, false)};  // 192 keys: padded to 256
    c.mask = true;
    c.fmask = fm;
    cases.push_back(c);
    // Partial last tiles under a mask: its tile padding joins the softmax
    // (then whole -inf tiles: 100 keys in 128), and test_sdpa_noncausal_randn_bias's
    // lengths at TT-NN's default chunks.
    StreamingCase p{"partial + mask", {1, 2, 70, 64}, {1, 2, 100, 64}, chunks(64, 128, false)};
    p.mask = true;
    p.fmask = fm;
    cases.push_back(p);
  }
  StreamingCase vit{"197 + mask", {1, 2, 197, 64}, {1, 2, 197, 64}, chunks(32, 32, false)};
  vit.mask = true;
  cases.push_back(vit);
  for (const StreamingCase& c : cases) expect_fast_equals_oracle(c);
}

TEST(TtsimSdpaStreaming, FastEqualsOracleAcrossComputeConfigsFormatsAndMasks) {
  std::vector<StreamingCase> cases;
  const MathFidelity fidelities[] = {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi4};
  for (int i = 0; i < 3; ++i)
    for (bool exp_approx : {false, true})
      for (bool approx : {false, true}) {
        if (exp_approx == (i != 1) && approx == (i != 0)) continue;  // in the test above
        StreamingCase c{"fidelity x exp x recip", {1, 1, 128, 64}, {1, 1, 128, 64}, chunks(64, 64)};
        c.cfg.compute.math_fidelity = fidelities[i];
        c.cfg.exp_approx_mode = exp_approx;
        c.cfg.compute.math_approx_mode = approx;
        cases.push_back(c);
      }
  const DataFormat formats[] = {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b},
                   outs[] = {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Float32};
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 3; ++o) {
      if (o == (i + 1) % 3) continue;  // in the test above
      StreamingCase c{"formats", {1, 1, 128, 64}, {1, 1, 128, 64}, chunks(64, 64)};
      c.fq = c.fkv = formats[i];
      c.cfg.compute.output = outs[o];
      cases.push_back(c);
    }
  for (const StreamingCase& c : cases) expect_fast_equals_oracle(c);
}

// Scores far beyond exp's range, tiny inputs, a scale of 1, and a row that
// sees no key.
TEST(TtsimSdpaStreaming, FastEqualsOracleOnEdgeValues) {
  std::vector<StreamingCase> cases;
  for (float s : {30.0f, 1e-20f, 1e10f}) {
    StreamingCase c{"scaled inputs", {1, 2, 128, 64}, {1, 1, 128, 64}, chunks(64, 64)};
    c.scale = s;
    cases.push_back(c);
  }
  StreamingCase one{"scale 1", {1, 1, 128, 32}, {1, 1, 128, 32}, chunks(64, 64, false)};
  one.cfg.scale = 1.0f;
  one.scale = 4.0f;
  cases.push_back(one);
  StreamingCase row{"-inf row", {1, 1, 64, 64}, {1, 1, 128, 64}, chunks(64, 64, false)};
  row.mask = row.masked_row = true;
  cases.push_back(row);
  for (const StreamingCase& c : cases) expect_fast_equals_oracle(c);
  // Isa::Scalar through the fast path's task split is the oracle too.
  const Shape qs{1, 2, 128, 64};
  const TileTensor q = tiles(qs, 1, DataFormat::Bfloat16), k = tiles(qs, 2, DataFormat::Bfloat16),
                   v = tiles(qs, 3, DataFormat::Bfloat16);
  TileTensor want, got;
  tt_sdpa_streaming_oracle(q, k, v, nullptr, want, chunks(64, 64));
  ThreadPool three(3);
  tt_sdpa_streaming(q, k, v, nullptr, got, chunks(64, 64), Exec{simd::Isa::Scalar, &three});
  EXPECT_TRUE(same_bits(got, want));
}

// The score exp without input clamping, under the packer's ReLU, equals the
// clamped Schraudolph exp stored to a 16-bit Dst wherever the kernel uses
// it (scores at or below the row max), and is +0 far below it.
TEST(TtsimSdpaStreaming, ScoreExpIsTheClampedExpUnderRelu) {
  for (Arch arch : {Arch::Wormhole, Arch::Blackhole})
    for (float scale : {0.125f, 0.0883883f, 1.0f})
      for (float d = 0.0f; d > -2000.0f; d = d * 1.01f - 0.01f) {
        const float want = sfpu_store(sfpu_exp_fast_approx_scaled(d, scale, arch), false);
        EXPECT_EQ(sdpa_streaming_score_exp(d, scale, arch), want) << d << " scale " << scale;
      }
  EXPECT_EQ(sdpa_streaming_score_exp(-std::numeric_limits<float>::infinity(), 0.125f, Arch::Wormhole), 0.0f);
  // Above about 0.72 / scale the signed 16-bit integer saturates: exp(0.72)
  // (0x3fff8000, stored as 0x3fff0000), where the clamped exp would not.
  EXPECT_EQ(sdpa_streaming_score_exp(100.0f, 0.125f, Arch::Wormhole), 1.9921875f);
  EXPECT_EQ(sdpa_streaming_score_exp(100.0f, 0.125f, Arch::Blackhole), 1.9921875f);
  // Schraudolph's exp(0) is 1 - 2^-6 (its bias constant trades the error
  // over the whole range): the row max's own exp, in every row.
  EXPECT_EQ(sdpa_streaming_score_exp(0.0f, 0.125f, Arch::Wormhole), 0.9765625f);
}

// The score exp over a row on the vector lanes equals the lane model value
// by value: random bit patterns (NaN, Inf, denormals, huge), the range the
// kernel feeds it, and the multiply-add results near the rounding's ties
// (t's fraction near one half, t near 0.5 and the saturation at 32767).
TEST(TtsimSdpaStreaming, ScoreExpsOnLanesEqualTheLaneModel) {
  std::mt19937 g(11);
  std::vector<float> xs;
  for (int i = 0; i < 4096; ++i) {
    const uint32_t u = g();
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  std::uniform_real_distribution<float> scores(-3000.0f, 50.0f);
  for (int i = 0; i < 8192; ++i) xs.push_back(scores(g));
  for (float scale : {0.125f, 0.0883883f, 1.0f, 1e-20f, 3e30f}) {
    const float a = 256.0f * 1.4426950408889634f * scale;
    // d with a * d + bias just around the half-integers, 0.5 and 32767.
    for (float t : {0.5f, 1.5f, 100.5f, 32766.5f, 32767.0f}) {
      float lo = (t - 32500.818359375f) / a, hi = lo;
      for (int step = 0; step < 64; ++step) {
        xs.push_back(lo = std::nextafter(lo, -1e30f));
        xs.push_back(hi = std::nextafter(hi, 1e30f));
      }
    }
    for (Arch arch : {Arch::Wormhole, Arch::Blackhole})
      for (simd::Isa isa : simd::vector_isas()) {
        std::vector<float> got = xs;
        sdpa_streaming_score_exps(got.data(), static_cast<int64_t>(got.size()), scale, simd::kernels_for(isa, arch),
                                  arch);
        for (size_t i = 0; i < xs.size(); ++i) {
          const float want = sdpa_streaming_score_exp(xs[i], scale, arch);
          ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << xs[i] << " scale " << scale << " " << simd::isa_name(isa);
        }
      }
  }
}

// ELWMUL by 1.0 at two fidelity phases or more on a 16-bit Dst gives back
// +0 and every bf16 value with an exponent field from 6 to 254, on both
// architectures (1 to 5 lose the second phase's product): the fast path's
// rescale by an unmoved max (alpha exactly 1) passes such rows through.
TEST(TtsimSdpaStreaming, TimesOneKeepsBf16Values) {
  for (Arch arch : {Arch::Wormhole, Arch::Blackhole})
    for (MathFidelity f : {MathFidelity::HiFi2, MathFidelity::HiFi3, MathFidelity::HiFi4}) {
      int lost_tiny = 0;  // why the bound is 6
      for (uint32_t h = 0; h < 0x10000u; ++h) {
        const uint32_t e = (h >> 7) & 255u, u = h << 16;
        float x;
        std::memcpy(&x, &u, 4);
        const float y = fpu_mul(x, 1.0f, f, false, arch);
        const bool kept = std::memcmp(&x, &y, 4) == 0;
        if (h == 0 || (e >= 6 && e <= 254)) {
          ASSERT_TRUE(kept) << std::hex << u;
        }
        lost_tiny += e >= 1 && e <= 5 && !kept;
      }
      EXPECT_GT(lost_tiny, 0);
    }
}

// Every table's times_one_keeps takes exactly what the test above shows the
// multiply keeps: +0 and the bf16 values with an exponent field from 6 to
// 254 (either sign), and nothing with a low half set.
TEST(TtsimSdpaStreaming, TimesOneKeepsOnLanesTakesExactlyTheKeptValues) {
  for (simd::Isa isa : simd::vector_isas()) {
    const simd::KernelTable* kern = simd::kernels_for(isa);
    for (uint32_t h = 0; h < 0x10000u; ++h) {
      const uint32_t e = (h >> 7) & 255u;
      for (uint32_t low : {0u, 1u, 0x8000u}) {
        const uint32_t u = (h << 16) | low;
        float row[16];
        std::fill(row, row + 16, 1.0f);
        std::memcpy(&row[h % 16], &u, 4);
        const bool want = low == 0 && (u == 0 || (e >= 6 && e <= 254));
        ASSERT_EQ(kern->times_one_keeps(row, 16), want) << std::hex << u << " " << simd::isa_name(isa);
      }
    }
  }
}

// The rescale exp's two algorithms, and the flag reaching them inverted:
// exp_approx_mode=false gives the approximation (0 below -42 after scaling).
TEST(TtsimSdpaStreaming, RescaleExpTakesTheFlagInverted) {
  EXPECT_EQ(sdpa_streaming_alpha_exp(-400.0f, 0.125f, true, Arch::Wormhole), 0.0f);
  EXPECT_EQ(sdpa_streaming_alpha_exp(0.0f, 0.125f, false, Arch::Wormhole), 1.0f);
  int differ = 0;
  for (float d = -0.01f; d > -300.0f; d *= 1.1f)
    differ += sdpa_streaming_alpha_exp(d, 0.125f, true, Arch::Wormhole) !=
              sdpa_streaming_alpha_exp(d, 0.125f, false, Arch::Wormhole);
  EXPECT_GT(differ, 10);
  // The notes a report prints.
  SdpaConfig on = chunks(32, 32, false), off = on;
  off.exp_approx_mode = false;
  const auto notes_on = sdpa_streaming_flag_notes(on), notes_off = sdpa_streaming_flag_notes(off);
  ASSERT_EQ(notes_on.size(), 1u);
  EXPECT_NE(notes_on[0].find("accurate rescale exp"), std::string::npos);
  ASSERT_EQ(notes_off.size(), 2u);
  EXPECT_NE(notes_off[0].find("#56710"), std::string::npos);
  EXPECT_NE(notes_off[1].find("approximate rescale exp"), std::string::npos);
}

// Against attention in float64 with the bound tt-metal's prefill tests
// assert (assert_with_pcc(gt, out, 0.994)).
TEST(TtsimSdpaStreaming, CloseToFloat64Attention) {
  for (bool causal : {true, false})
    for (auto [qc, kc] : {std::pair<int, int>{256, 128}, {64, 64}}) {
      const Shape qs{1, 2, 512, 128}, ks{1, 1, 512, 128};
      const TileTensor q = tiles(qs, 11, DataFormat::Bfloat16), k = tiles(ks, 12, DataFormat::Bfloat16),
                       v = tiles(ks, 13, DataFormat::Bfloat16);
      TileTensor out;
      SdpaConfig c = chunks(qc, kc, causal);
      c.compute.math_fidelity = MathFidelity::HiFi4;
      tt_sdpa_streaming(q, k, v, nullptr, out, c, Exec{});
      const Tensor ref = Tensor::from_f64(qs, attention_f64(q, k, v, causal, 1.0 / std::sqrt(128.0)));
      const double pcc = compare::compare(ref, to_tensor(out), compare::Options{}).pcc;
      EXPECT_GT(pcc, 0.994) << "causal " << causal << " chunks " << qc << "/" << kc;
    }
  // Partial last tiles (s 300: 12 valid columns in the last tile).
  for (bool causal : {true, false}) {
    const Shape qs{1, 2, 300, 128}, ks{1, 1, 300, 128};
    const TileTensor q = tiles(qs, 14, DataFormat::Bfloat16), k = tiles(ks, 15, DataFormat::Bfloat16),
                     v = tiles(ks, 16, DataFormat::Bfloat16);
    TileTensor out;
    SdpaConfig c = chunks(64, 128, causal);
    c.compute.math_fidelity = MathFidelity::HiFi4;
    tt_sdpa_streaming(q, k, v, nullptr, out, c, Exec{});
    const Tensor ref = Tensor::from_f64(qs, attention_f64(q, k, v, causal, 1.0 / std::sqrt(128.0)));
    EXPECT_GT(compare::compare(ref, to_tensor(out), compare::Options{}).pcc, 0.994) << "partial, causal " << causal;
  }
}

// test_sdpa_tt_large_seq's chunks, bfloat16, dh 128, causal (tiles of 2048
// bytes): Q 8x4 x2, K and V 4x4 x2 each, the 2-tile palette, qk_im 8x4,
// out_im 2x8x4, 5x8 statistics, 3 single tiles, the output 2x2x4.
TEST(TtsimSdpaStreaming, CircularBuffersAsTheFactorySizesThem) {
  const TileTensor t = make_tile_tensor({1, 1, 512, 128}, DataFormat::Bfloat16);
  const int64_t tiles = 64 + 64 + 2 + 32 + 64 + 40 + 3 + 16;
  EXPECT_EQ(sdpa_streaming_cb_bytes(t, t, t, nullptr, chunks(256, 128)), tiles * 2048);
}

// A float32 Q reaches the 16-bit Dst's matmul as the unpacker cuts it: its
// bf16 truncation (not the host's rounding) gives the same bits, and at
// the device frame a float32 Q runs at latest and is refused at 2024.
TEST(TtsimSdpaStreaming, Float32QIsItsBf16Truncation) {
  const Shape qs{1, 2, 64, 64}, ks{1, 1, 64, 64};
  const TileTensor q = tiles(qs, 31, DataFormat::Float32), k = tiles(ks, 32, DataFormat::Bfloat16);
  std::vector<float> cut;
  for (int64_t r = 0; r < 64 * 2; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      uint32_t u;
      std::memcpy(&u, &q.data[static_cast<size_t>(r * q.pcols + c)], 4);
      u &= 0xffff0000u;
      float x;
      std::memcpy(&x, &u, 4);
      cut.push_back(x);
    }
  const TileTensor qt = to_tile_layout(cut.data(), qs, DataFormat::Bfloat16);
  TileTensor want, got;
  tt_sdpa_streaming_oracle(q, k, k, nullptr, got, chunks(32, 32));
  tt_sdpa_streaming_oracle(qt, k, k, nullptr, want, chunks(32, 32));
  EXPECT_TRUE(same_bits(got, want));
  TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
  SdpaConfig latest = chunks(32, 32);
  latest.compute.tt_metal = TtMetal::Latest;
  EXPECT_TRUE(same_bits(run_sdpa(dev, "sdpa", q, k, k, nullptr, latest), want));
  SdpaConfig at2024 = chunks(32, 32);
  at2024.compute.tt_metal = TtMetal::R2024;
  try {
    run_sdpa(dev, "sdpa", q, k, k, nullptr, at2024);
    FAIL() << "ran at 2024";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a float32 Q runs at tt_metal latest"), std::string::npos) << e.what();
  }
}

// The device frame: the kernel's bits, its checks, its buffers against L1.
TEST(TtsimSdpaStreaming, RunsOnTheDeviceFrame) {
  TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
  const TileTensor q = tiles({1, 2, 128, 64}, 1, DataFormat::Bfloat16), k = tiles({1, 1, 128, 64}, 2, DataFormat::Bfp8_b);
  SdpaConfig latest = chunks(64, 64);
  latest.compute.tt_metal = TtMetal::Latest;  // run_sdpa's program: streaming at latest with a 16-bit Dst
  TileTensor want;
  tt_sdpa_streaming_oracle(q, k, k, nullptr, want, latest);
  EXPECT_TRUE(same_bits(run_sdpa(dev, "sdpa", q, k, k, nullptr, latest), want));
  const TileTensor f32 = make_tile_tensor({1, 1, 128, 64}, DataFormat::Float32);
  EXPECT_THROW(run_sdpa(dev, "sdpa", q, f32, f32, nullptr, latest), InputError);
  // 1024-key chunks of dh 256 need more than a core's L1.
  const TileTensor big = make_tile_tensor({1, 1, 1024, 256}, DataFormat::Bfloat16);
  SdpaConfig huge = chunks(1024, 1024);
  huge.compute.tt_metal = TtMetal::Latest;
  EXPECT_THROW(run_sdpa(dev, "sdpa", big, big, big, nullptr, huge), DeviceOutOfMemory);
}

// The device operation runs a given mask over a partial last key tile on
// both latest programs and says in one line that the padded keys join the
// softmax; whole tiles or no mask say nothing of it; 2024's kernel refuses
// the lengths as before.
TEST(TtsimSdpaStreaming, SaysThePaddedKeysUnderAGivenMaskJoinTheSoftmax) {
  const TileTensor q = tiles({1, 2, 70, 64}, 51, DataFormat::Bfloat16), k = tiles({1, 1, 100, 64}, 52, DataFormat::Bfloat16),
                   mask = tiles({1, 1, 70, 100}, 53, DataFormat::Bfloat16), k96 = first_rows(k, 96),
                   mask96 = tiles({1, 1, 70, 96}, 53, DataFormat::Bfloat16);
  const auto leak_notes = [](const TtDevice& dev) {
    int n = 0;
    for (const std::string& line : dev.notes()) n += line.find("#54833") != std::string::npos;
    return n;
  };
  for (bool fp32 : {false, true}) {
    SdpaConfig c = chunks(32, 64, false);
    c.compute.tt_metal = TtMetal::Latest;
    c.compute.fp32_dest_acc_en = fp32;
    TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
    run_sdpa(dev, "sdpa", q, k, k, &mask, c);
    ASSERT_EQ(leak_notes(dev), 1) << "fp32 " << fp32;
    for (const std::string& line : dev.notes())
      if (line.find("#54833") != std::string::npos) {
        EXPECT_EQ(line.rfind("keys 100-127 ", 0), 0u) << line;
        EXPECT_NE(line.find("tt_metal latest"), std::string::npos) << line;
      }
    TtDevice quiet(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
    run_sdpa(quiet, "sdpa", q, k, k, nullptr, c);
    run_sdpa(quiet, "sdpa", q, k96, k96, &mask96, c);
    EXPECT_EQ(leak_notes(quiet), 0) << "fp32 " << fp32;
  }
  SdpaConfig at2024 = chunks(32, 64, false);
  at2024.compute.tt_metal = TtMetal::R2024;
  TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
  try {
    run_sdpa(dev, "sdpa", q, k, k, &mask, at2024);
    FAIL() << "ran at 2024";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide"), std::string::npos) << e.what();
  }
}

// TT-NN's op hands the kernel the mask times 1 / scale (the kernel scales
// it with the scores): at latest run_sdpa gives the kernel's bits on the
// mask times 8 (dh 64: exact in bfloat16), on both programs, so a finite
// bias keeps its weight; 2024's kernel takes the mask as given.
TEST(TtsimSdpaStreaming, OpMultipliesAGivenMaskByOneOverTheScale) {
  const TileTensor q = tiles({1, 2, 64, 64}, 61, DataFormat::Bfloat16), k = tiles({1, 1, 96, 64}, 62, DataFormat::Bfloat16);
  const std::vector<float> mv = normal(64 * 96, 63);
  std::vector<float> m8 = mv;
  for (float& x : m8) x *= 8.0f;
  const TileTensor mask = to_tile_layout(mv.data(), {1, 1, 64, 96}, DataFormat::Bfloat16),
                   mask8 = to_tile_layout(m8.data(), {1, 1, 64, 96}, DataFormat::Bfloat16);
  for (bool fp32 : {false, true}) {
    SdpaConfig c = chunks(32, 32, false);
    c.compute.tt_metal = TtMetal::Latest;
    c.compute.fp32_dest_acc_en = fp32;
    TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
    TileTensor want;
    if (fp32) {
      tt_sdpa_standard_oracle(q, k, k, &mask8, want, c);
    } else {
      tt_sdpa_streaming_oracle(q, k, k, &mask8, want, c);
    }
    EXPECT_TRUE(same_bits(run_sdpa(dev, "sdpa", q, k, k, &mask, c), want)) << "fp32 " << fp32;
  }
  SdpaConfig at2024 = chunks(32, 32, false);
  at2024.compute.tt_metal = TtMetal::R2024;
  TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "backend"));
  TileTensor want;
  tt_sdpa(q, k, k, &mask, want, at2024, kOracle);
  EXPECT_TRUE(same_bits(run_sdpa(dev, "sdpa", q, k, k, &mask, at2024), want));
}

TEST(TtsimSdpaStreaming, RefusesWhatTheKernelDoesNotTake) {
  const Shape q{1, 2, 64, 64};
  EXPECT_EQ(sdpa_streaming_problem(q, q, q, nullptr, chunks(64, 128)), "");
  SdpaConfig fp32 = chunks(64, 64);
  fp32.compute.fp32_dest_acc_en = true;
  EXPECT_NE(sdpa_streaming_problem(q, q, q, nullptr, fp32).find("fp32_dest_acc_en"), std::string::npos);
  SdpaConfig win = chunks(64, 64, false);
  win.sliding_window_size = 16;  // runs, unless a q chunk's window reaches no key
  EXPECT_EQ(sdpa_streaming_problem(q, q, q, nullptr, win), "");
  EXPECT_NE(sdpa_streaming_problem({1, 2, 256, 64}, q, q, nullptr, win).find("sliding_window_size"), std::string::npos);
  const Shape q70{1, 2, 70, 64}, m70{1, 1, 70, 64};
  EXPECT_EQ(sdpa_streaming_problem(q70, q, q, nullptr, chunks(64, 64, false)), "");  // a partial last tile runs
  EXPECT_EQ(sdpa_streaming_problem(q70, q, q, &m70, chunks(64, 64, false)), "");  // with a mask too
  EXPECT_NE(sdpa_streaming_problem(q, q, q, nullptr, chunks(48, 64)).find("q_chunk_size"), std::string::npos);
  const TileTensor t = tiles(q, 1, DataFormat::Bfloat16);
  TileTensor out;
  EXPECT_THROW(tt_sdpa_streaming(t, t, t, nullptr, out, fp32), InputError);
}
