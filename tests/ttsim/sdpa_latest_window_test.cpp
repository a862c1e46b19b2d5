// sliding_window_size at tt_metal latest (src/backends/ttsim/ops/sdpa/
// sdpa_window.h) on both programs the factory picks: the streaming kernel's
// stamps and K-range narrowing are the window exactly; the fp32-Dst
// program's generated mask is, but for windows above 32 that are not a
// multiple of 32 (which tt-sim reproduces and notes); fast path and oracle
// bit for bit on every instruction set, 1 and 3 threads, across chunk
// sizes, padded lengths and windows; float64 attention; the op and `mha
// run` end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa/sdpa_window.h"
#include "compare/compare.h"
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

SdpaConfig win_cfg(int64_t qc, int64_t kc, bool causal, int64_t W, bool fp32 = false) {
  SdpaConfig c;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.is_causal = causal;
  c.sliding_window_size = W;
  c.compute.fp32_dest_acc_en = fp32;
  c.compute.tt_metal = TtMetal::Latest;
  return c;
}

// TT-NN's window (create_sliding_window_mask_prefill): causal [q - W + 1, q],
// non-causal [q - W/2, q + W/2]; W = 0: causal or everything.
bool win_visible(const SdpaConfig& c, int64_t q, int64_t k) {
  const int64_t W = c.sliding_window_size;
  if (c.is_causal) return k <= q && (W <= 0 || k >= q - W + 1);
  return W <= 0 || (k >= q - W / 2 && k <= q + W / 2);
}

void win_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, TileTensor& out, const SdpaConfig& c) {
  if (c.compute.fp32_dest_acc_en) tt_sdpa_standard_oracle(q, k, v, nullptr, out, c);
  else tt_sdpa_streaming_oracle(q, k, v, nullptr, out, c);
}

// The oracle's output, after every fast path matched it bit for bit.
TileTensor win_fast_equals_oracle(const std::string& name, const Shape& qs, const Shape& kvs, const SdpaConfig& c) {
  const TileTensor q = tiles(qs, 1, DataFormat::Bfloat16), k = tiles(kvs, 2, DataFormat::Bfloat16),
                   v = tiles(kvs, 3, DataFormat::Bfloat16);
  TileTensor want;
  win_oracle(q, k, v, want, c);
  static ThreadPool three(3);  // results never depend on the thread count
  for (simd::Isa isa : simd::vector_isas())
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
      TileTensor got;
      if (c.compute.fp32_dest_acc_en) tt_sdpa_standard(q, k, v, nullptr, got, c, Exec{isa, pool});
      else tt_sdpa_streaming(q, k, v, nullptr, got, c, Exec{isa, pool});
      EXPECT_TRUE(same_bits(got, want)) << name << " on " << simd::isa_name(isa) << (pool ? ", 3 threads" : "");
    }
  return want;
}

// PCC of out against float64 attention (scale 1/sqrt(dh), GQA) where row i
// sees key j iff vis(i, j), over the rows that see a key.
template <class Vis>
double win_pcc_float64(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor& out, Vis vis) {
  const int64_t H = q.shape[1], G = H / k.shape[1], S = q.rows, SK = k.rows, D = q.cols;
  std::vector<double> got, want;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i) {
      std::vector<double> w(static_cast<size_t>(SK), 0.0);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < SK; ++j) {
        if (!vis(i, j)) continue;
        double d = 0;
        for (int64_t c = 0; c < D; ++c) d += static_cast<double>(q.at(h, i, c)) * k.at(h / G, j, c);
        mx = std::max(mx, w[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(D)));
      }
      if (mx == -1e300) continue;
      for (int64_t j = 0; j < SK; ++j) sum += vis(i, j) ? (w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - mx)) : 0.0;
      for (int64_t c = 0; c < D; ++c) {
        double ref = 0;
        for (int64_t j = 0; j < SK; ++j)
          if (vis(i, j)) ref += w[static_cast<size_t>(j)] / sum * v.at(h / G, j, c);
        want.push_back(ref);
        got.push_back(out.at(h, i, c));
      }
    }
  return pcc(got, want);
}

const int64_t kWindows[] = {1, 5, 8, 31, 32, 33, 40, 63, 64, 100, 128, 1000};

}  // namespace

// The streaming kernel's stamps (the writer's leading / trailing edge tiles
// and -inf runs, plus the causal diagonal) mask exactly the keys outside
// TT-NN's window, for every row and column of every tile pair.
TEST(SdpaLatestWindow, StreamingStampsAreTheWindow) {
  for (bool causal : {true, false})
    for (int64_t W : kWindows) {
      const SdpaConfig c = win_cfg(32, 32, causal, W);
      for (int64_t qt = 0; qt < 10; ++qt)
        for (int64_t kt = 0; kt < 12; ++kt)
          for (int64_t r = 0; r < 32; ++r)
            for (int64_t col = 0; col < 32; ++col) {
              const bool diag = causal && (kt > qt || (kt == qt && col > r));
              const bool masked = diag || sdpa_window_stamp_masks(c, qt, kt, r, col);
              ASSERT_EQ(masked, !win_visible(c, 32 * qt + r, 32 * kt + col))
                  << "W " << W << (causal ? " causal" : "") << " q tile " << qt << " k tile " << kt << " (" << r
                  << ", " << col << ")";
              if (sdpa_window_stamp_masks(c, qt, kt, r, col)) {
                ASSERT_TRUE(sdpa_window_stamps_tile(c, qt, kt));
              }
            }
    }
}

// K-range narrowing: the chunks the kernel skips hold no key any query of
// the q chunk sees, and with a small window it does skip some.
TEST(SdpaLatestWindow, KRangeSkipsOnlyChunksOutsideTheWindow) {
  int64_t skipped = 0;
  for (bool causal : {true, false})
    for (int64_t W : kWindows)
      for (auto [qt, kt] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}, {4, 2}, {2, 4}}) {
        const SdpaConfig c = win_cfg(32 * qt, 32 * kt, causal, W);
        const int64_t nk = 24 / kt;
        for (int64_t qc = 0; qc < 24 / qt; ++qc) {
          const SdpaKRange r = sdpa_streaming_k_range(c, qc * qt, qt, kt, nk);
          ASSERT_LT(r.begin, r.end);
          for (int64_t kc = 0; kc < nk; ++kc) {
            if (kc >= r.begin && kc < r.end) continue;
            ++skipped;
            for (int64_t i = qc * qt * 32; i < (qc + 1) * qt * 32; ++i)
              for (int64_t j = kc * kt * 32; j < (kc + 1) * kt * 32; ++j)
                ASSERT_FALSE(win_visible(c, i, j)) << "W " << W << " q chunk " << qc << " skips k chunk " << kc;
          }
        }
      }
  EXPECT_GT(skipped, 1000);
  // causal W 8, q 64 / k 32: the fifth q chunk (tiles 8-9) starts at k chunk 7.
  EXPECT_EQ(sdpa_streaming_k_range(win_cfg(64, 32, true, 8), 8, 2, 1, 24).begin, 7);
}

// The fp32-Dst program's generated mask: the window exactly when W <= 32 or
// a multiple of 32; otherwise it never masks a key of the window and lets
// through up to 31 keys before it (some row always gets them), and the run
// says so in one line.
TEST(SdpaLatestWindow, GeneratedMaskOfTheFp32Program) {
  for (int64_t W : kWindows) {
    if (W > 300) continue;  // ten q tiles hold no row whose window starts past key 0
    const SdpaConfig c = win_cfg(32, 32, true, W, true);
    const bool exact = W <= 32 || W % 32 == 0;
    int64_t extra = 0;
    for (int64_t qt = 0; qt < 10; ++qt)
      for (int64_t kt = 0; kt <= qt; ++kt)
        for (int64_t r = 0; r < 32; ++r)
          for (int64_t col = 0; col < 32; ++col) {
            const int64_t qp = 32 * qt + r, kp = 32 * kt + col;
            const bool masked = sdpa_window_generated_masks(W, qt, kt, r, col);
            if (win_visible(c, qp, kp)) ASSERT_FALSE(masked) << W << " " << qp << " " << kp;
            else if (!masked) {
              ASSERT_FALSE(exact) << W << " " << qp << " " << kp;
              ASSERT_TRUE(kp <= qp && kp > qp - W - 31) << W << " " << qp << " " << kp;
              ++extra;
            }
          }
    EXPECT_EQ(extra > 0, !exact) << W;
    EXPECT_EQ(sdpa_window_generated_note(c).empty(), exact) << W;
  }
}

// Streaming: fast path and oracle bit for bit across chunk sizes, padded
// and partial lengths, causal and not, GQA, windows smaller than a tile,
// not a multiple of 32, and larger than the sequence; and Blackhole.
TEST(SdpaLatestWindow, StreamingFastEqualsOracle) {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {{32, 32, 192}, {64, 32, 160}, {32, 64, 100}, {128, 64, 256},
                                                          {64, 128, 70}};
  for (const auto& [qc, kc, s] : shapes)
    for (bool causal : {true, false})
      for (int64_t W : {5, 40, 1000}) {
        const std::string name = "q" + std::to_string(qc) + " k" + std::to_string(kc) + " s" + std::to_string(s) +
                                 " W" + std::to_string(W) + (causal ? " causal" : "");
        win_fast_equals_oracle(name, {1, 2, s, 64}, {1, 1, s, 64}, win_cfg(qc, kc, causal, W));
      }
  for (bool causal : {true, false})
    for (int64_t W : {64, 100})  // tile-aligned edges; W/2 = 50 straddles two tiles
      win_fast_equals_oracle("W" + std::to_string(W), {1, 2, 192, 64}, {1, 1, 192, 64}, win_cfg(64, 32, causal, W));
  SdpaConfig bh = win_cfg(64, 32, true, 33);
  bh.compute.arch = Arch::Blackhole;
  win_fast_equals_oracle("Blackhole", {1, 2, 128, 64}, {1, 2, 128, 64}, bh);
}

// The fp32-Dst program (causal only): the same across chunk sizes, padded
// lengths and windows.
TEST(SdpaLatestWindow, StandardFastEqualsOracle) {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {{32, 32, 192}, {64, 32, 160}, {32, 64, 100}, {64, 128, 70}};
  for (const auto& [qc, kc, s] : shapes)
    for (int64_t W : {5, 40, 64, 1000})
      win_fast_equals_oracle("q" + std::to_string(qc) + " k" + std::to_string(kc) + " s" + std::to_string(s) + " W" +
                                 std::to_string(W),
                             {1, 2, s, 64}, {1, 1, s, 64}, win_cfg(qc, kc, true, W, true));
}

// Against float64 attention over the window: PCC >= 0.99 on both programs
// (the streaming kernel over TT-NN's window; the fp32-Dst program over it
// when W is a multiple of 32, else over the keys its generated mask lets
// through, which the exact window then trails).
TEST(SdpaLatestWindow, TracksFloat64Attention) {
  const Shape s{1, 2, 256, 64};
  const TileTensor q = tiles(s, 11, DataFormat::Bfloat16), k = tiles(s, 12, DataFormat::Bfloat16),
                   v = tiles(s, 13, DataFormat::Bfloat16);
  for (bool fp32 : {false, true})
    for (bool causal : {true, false})
      for (int64_t W : {40, 64}) {
        if (fp32 && !causal) continue;
        SdpaConfig c = win_cfg(64, 32, causal, W, fp32);
        c.compute.math_fidelity = MathFidelity::HiFi4;
        TileTensor out;
        win_oracle(q, k, v, out, c);
        const double exact = win_pcc_float64(q, k, v, out, [&](int64_t i, int64_t j) { return win_visible(c, i, j); });
        std::cout << "[window] " << (fp32 ? "fp32 Dst" : "streaming") << (causal ? " causal" : "") << " W " << W
                  << ": PCC " << exact;
        if (fp32 && W % 32 != 0) {
          const double generated = win_pcc_float64(q, k, v, out, [&](int64_t i, int64_t j) {
            return j <= i && !sdpa_window_generated_masks(W, i / 32, j / 32, i % 32, j % 32);
          });
          std::cout << " (against the keys its generated mask lets through: " << generated << ")";
          EXPECT_GE(generated, 0.99) << W;
        } else {
          EXPECT_GE(exact, 0.99) << fp32 << causal << W;
        }
        std::cout << "\n";
      }
}

// A window beyond the sequence stamps nothing and narrows nothing on the
// streaming kernel: the bits of no window.
TEST(SdpaLatestWindow, StreamingWindowBeyondTheSequenceIsNoWindow) {
  const Shape s{1, 2, 160, 64};
  const TileTensor q = tiles(s, 21, DataFormat::Bfloat16), k = tiles(s, 22, DataFormat::Bfloat16),
                   v = tiles(s, 23, DataFormat::Bfloat16);
  for (bool causal : {true, false}) {
    TileTensor with, without;
    tt_sdpa_streaming_oracle(q, k, v, nullptr, with, win_cfg(64, 32, causal, 1000));
    tt_sdpa_streaming_oracle(q, k, v, nullptr, without, win_cfg(64, 32, causal, 0));
    EXPECT_TRUE(same_bits(with, without)) << causal;
    tt_sdpa_streaming_oracle(q, k, v, nullptr, with, win_cfg(64, 32, causal, 40));
    EXPECT_FALSE(same_bits(with, without)) << causal;
  }
}

// What neither program runs, one line each: a non-causal window on the
// fp32-Dst program (its writer would not produce the masks its kernel
// waits for), a non-causal window whose last q chunk reaches no key, and
// chunked prefill with a window (TT-NN's wrapper takes none).
TEST(SdpaLatestWindow, RefusesInOneLine) {
  const Shape s{1, 1, 64, 64};
  const TileTensor t = tiles(s, 1, DataFormat::Bfloat16);
  TileTensor out;
  auto refusal = [&](const SdpaConfig& c, const TileTensor& q, const TileTensor& kv) -> std::string {
    try {
      win_oracle(q, kv, kv, out, c);
    } catch (const InputError& e) {
      return e.what();
    }
    return "ran";
  };
  EXPECT_TRUE(contains(refusal(win_cfg(32, 32, false, 16, true), t, t),
                       "sliding_window_size with is_causal=false is not modelled at tt_metal latest with "
                       "fp32_dest_acc_en"));
  const TileTensor longq = tiles({1, 1, 256, 64}, 2, DataFormat::Bfloat16);
  EXPECT_TRUE(contains(refusal(win_cfg(64, 64, false, 16), longq, t), "window holds none of K's 64 keys"));
  EXPECT_EQ(refusal(win_cfg(64, 64, false, 512), longq, t), "ran");
  EXPECT_TRUE(contains(sdpa_streaming_problem({1, 1, 64, 64}, {1, 1, 128, 64}, {1, 1, 128, 64}, nullptr,
                                              win_cfg(64, 64, true, 16), 64),
                       "chunked SDPA takes no sliding_window_size"));
}

// `mha op sdpa --option tt_metal=latest --option sliding_window_size=W`:
// the streaming kernel's bits (every ISA, 1 and 3 threads), and with
// --fp32-dest-acc-en the fp32-Dst program, whose unaligned window is noted.
TEST(SdpaLatestWindow, OpCliRunsTheWindowAtLatest) {
  test::TempDir dir;
  const Shape s{1, 2, 100, 64};
  const std::vector<float> qv = normal(shape_numel(s), 31), kv = normal(shape_numel(s), 32), vv = normal(shape_numel(s), 33);
  std::string in;
  const char* names[] = {"q.npy", "k.npy", "v.npy"};
  const std::vector<float>* vals[] = {&qv, &kv, &vv};
  for (int i = 0; i < 3; ++i) {
    io::write_npy(dir.file(names[i]), Tensor::from_f32(s, *vals[i]));
    in += " " + test::shell_quote(dir.file(names[i]));
  }
  const TileTensor q = to_tile_layout(qv.data(), s, DataFormat::Bfloat16),
                   k = to_tile_layout(kv.data(), s, DataFormat::Bfloat16),
                   v = to_tile_layout(vv.data(), s, DataFormat::Bfloat16);
  const std::string opts = " --option tt_metal=latest --option q_chunk_size=64 --option sliding_window_size=40";
  std::vector<std::string> isas = {"scalar"};
  for (simd::Isa i : simd::vector_isas()) isas.push_back(simd::isa_name(i));
  TileTensor want;
  tt_sdpa_streaming_oracle(q, k, v, nullptr, want, win_cfg(64, 32, true, 40));
  for (const std::string& isa : isas)
    for (int threads : {1, 3}) {
      const test::CommandResult r =
          test::run_mha("op sdpa" + in + " -o " + test::shell_quote(dir.file("o.npy")) + opts + " --option kernels=" +
                        isa + " --option threads=" + std::to_string(threads));
      ASSERT_EQ(r.exit_code, 0) << isa << r.err;
      EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), want)) << isa << " " << threads;
    }
  const test::CommandResult r =
      test::run_mha("op sdpa" + in + " -o " + test::shell_quote(dir.file("f.npy")) + opts + " --fp32-dest-acc-en --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sliding_window_size"], 40);
  bool noted = false;
  for (const auto& n : j["notes"]) noted = noted || contains(n.get<std::string>(), "generate_causal_sliding_window_mask");
  EXPECT_TRUE(noted) << j["notes"].dump();
  tt_sdpa_standard_oracle(q, k, v, nullptr, want, win_cfg(64, 32, true, 40, true));
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("f.npy")), want));
}

// `mha run` of a Mistral-style tt-sim config (a window on the layer) at
// tt_metal latest: the SDPA pipeline runs the window on the fp32-Dst
// program (tt_transformers' prefill config) and tracks the cpu backend.
TEST(SdpaLatestWindow, MhaRunMistralConfigAtLatest) {
  test::TempDir d;
  Tensor y[2];
  for (int i = 0; i < 2; ++i) {
    const std::string backend = i == 0 ? R"("cpu")" : R"({"name": "tt-sim", "tt_metal": "latest"})";
    test::write_text(d.file("c.json"), R"({"variant": "llama_attention",
      "params": {"model_type": "mistral", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
                 "head_dim": 32, "rope_theta": 1000000.0, "sliding_window": 64},
      "weights": {"init": "torch", "seed": 0}, "inputs": {"seed": 0, "x": {"randn": [1, 160, 256]}},
      "runs": {"iterations": 0}, "backend": )" + backend + "}");
    const test::CommandResult r =
        test::run_mha("run --config " + test::shell_quote(d.file("c.json")) + " -o " + test::shell_quote(d.file("y.npy")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (i == 1) {
      EXPECT_TRUE(contains(r.out, "latest")) << r.out;
    }
    y[i] = io::read_tensor(d.file("y.npy"));
  }
  const double p = compare::compare(y[0], y[1], compare::Options{}).pcc;
  std::cout << "[window] mha run, Mistral-style W 64 at latest: output PCC against cpu " << p << "\n";
  EXPECT_GE(p, 0.999);
}
