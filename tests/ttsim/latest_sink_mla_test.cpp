// tt_metal latest: the streaming kernel's attention sink (normalize_row_streaming
// adds exp((sink - m) * scale) to the reduced row sum; docs/TTSIM.md) and
// multi-head latent attention through the latest SDPA programs (V read from
// K's first head_dim_v columns) and the latest SDPA decode with use_mla.
// Each: the fast path bit for bit with the oracle (every instruction set this
// CPU runs, 1 and 3 threads), the device operations against the plain ops,
// float64 attention, and the refusals that remain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "compare/compare.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "ttsim_test_util.h"
#include "util/error.h"
#include "util/thread_pool.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

SdpaConfig sinkmla_latest(int64_t qc, int64_t kc, bool causal = true, bool fp32 = false) {
  SdpaConfig c;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.is_causal = causal;
  c.compute.tt_metal = TtMetal::Latest;
  c.compute.fp32_dest_acc_en = fp32;
  if (fp32) c.compute.math_fidelity = MathFidelity::HiFi4;
  return c;
}

// The program's fast path on every vector ISA, alone and on 3 threads,
// against its oracle (run_sdpa's choice: streaming with a 16-bit Dst,
// sdpa_standard with an fp32 one). Returns the oracle's output.
TileTensor sinkmla_fast_equals_oracle(const std::string& name, const TileTensor& q, const TileTensor& k,
                                      const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg) {
  const bool streaming = !cfg.compute.fp32_dest_acc_en;
  TileTensor want;
  if (streaming) tt_sdpa_streaming_oracle(q, k, v, mask, want, cfg);
  else tt_sdpa_standard_oracle(q, k, v, mask, want, cfg);
  static ThreadPool three(3);  // results never depend on the thread count
  for (simd::Isa isa : simd::vector_isas())
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
      TileTensor got;
      if (streaming) tt_sdpa_streaming(q, k, v, mask, got, cfg, Exec{isa, pool});
      else tt_sdpa_standard(q, k, v, mask, got, cfg, Exec{isa, pool});
      EXPECT_TRUE(same_bits(got, want)) << name << " on " << simd::isa_name(isa) << (pool ? ", 3 threads" : "");
    }
  return want;
}

// Attention in float64 on the operands' values: softmax(q k^T * scale) v
// over the causal or whole key range, with V the first dv columns of v,
// and (sinks non-empty) one more key per head of logit sinks[h] * scale and
// no value. [b, nqh, s, dv] row-major.
std::vector<double> sinkmla_f64(const TileTensor& q, const TileTensor& k, const TileTensor& v, int64_t dv,
                                bool causal, double scale, const std::vector<float>& sinks = {}) {
  const int64_t B = q.shape[0], H = q.shape[1], HK = k.shape[1], S = q.shape[2], SK = k.shape[2], D = q.shape[3];
  std::vector<double> out, p(static_cast<size_t>(SK));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h, kh = b * HK + h / (H / HK);
      for (int64_t i = 0; i < S; ++i) {
        const int64_t n = causal ? i + 1 : SK;
        double mx = sinks.empty() ? -1e300 : sinks[static_cast<size_t>(h)] * scale, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(q.at(bh, i, d)) * k.at(kh, j, d);
          mx = std::max(mx, p[static_cast<size_t>(j)] = s * scale);
        }
        for (int64_t j = 0; j < n; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
        if (!sinks.empty()) sum += std::exp(sinks[static_cast<size_t>(h)] * scale - mx);
        for (int64_t d = 0; d < dv; ++d) {
          double o = 0;
          for (int64_t j = 0; j < n; ++j) o += p[static_cast<size_t>(j)] * v.at(kh, j, d);
          out.push_back(o / sum);
        }
      }
    }
  return out;
}

std::vector<double> sinkmla_values(const TileTensor& t) {
  std::vector<double> v;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) v.push_back(t.at(b, r, c));
  return v;
}

// mha op's device operation in-process (the CLI's path), 2 threads, at
// tt_metal latest unless opts say otherwise.
OpResult sinkmla_op(const std::string& op, const std::vector<Tensor>& in, const nlohmann::ordered_json& opts,
                    DataFormat kv = DataFormat::Bfloat16) {
  return run_device_op(op, in, opts, kv, "latest");
}

}  // namespace

// ---- the streaming kernel's attention sink ----

TEST(TtsimStreamingSink, FastEqualsOracle) {
  struct C {
    const char* name;
    Shape q, kv;
    SdpaConfig cfg;
    DataFormat fkv;
  };
  std::vector<C> cases;
  // sbh 2, 4, 1 with the first row group's keys split, TT-NN's default;
  // causal and not; GQA; padded and partial lengths; bfloat8_b K and V.
  for (auto [qc, kc] : {std::pair<int, int>{64, 128}, {128, 64}, {32, 32}})
    for (bool causal : {true, false})
      cases.push_back({"chunks", {1, 4, 128, 32}, {1, 2, 128, 32}, sinkmla_latest(qc, kc, causal), DataFormat::Bfloat16});
  cases.push_back({"sbh 1 split", {1, 4, 64, 32}, {1, 1, 512, 32}, sinkmla_latest(32, 512, false), DataFormat::Bfloat16});
  cases.push_back({"padded causal", {2, 4, 100, 64}, {2, 4, 100, 64}, sinkmla_latest(64, 32), DataFormat::Bfp8_b});
  cases.push_back({"partial", {1, 4, 70, 64}, {1, 1, 150, 64}, sinkmla_latest(32, 64, false), DataFormat::Bfloat16});
  int n = 0;
  for (C& c : cases) {
    // Below, near and far above the row maxima (unscaled, as the kernel takes them).
    c.cfg.attention_sink = {0.5f, -3.0f, 12.0f, 40.0f};
    // Both exp_approx_mode values (the sink's exp follows the flag,
    // inverted) and both architectures, alternating over the cases.
    const bool exp_approx = n % 2 == 0;
    c.cfg.exp_approx_mode = exp_approx;
    c.cfg.compute.math_approx_mode = !exp_approx;
    c.cfg.compute.arch = (n++ / 2) % 2 == 0 ? Arch::Wormhole : Arch::Blackhole;
    const TileTensor q = tiles(c.q, 1, DataFormat::Bfloat16), k = tiles(c.kv, 2, c.fkv), v = tiles(c.kv, 3, c.fkv);
    sinkmla_fast_equals_oracle(c.name, q, k, v, nullptr, c.cfg);
  }
}

// Scores scaled by 30 and 1e-20, sinks at the edges of bfloat16's range, a
// row of only -inf keys (its max is -inf: the sink's exp overflows).
TEST(TtsimStreamingSink, FastEqualsOracleOnEdgeValues) {
  const Shape s{1, 2, 64, 64};
  for (float scale : {30.0f, 1e-20f}) {
    SdpaConfig c = sinkmla_latest(32, 32);
    c.attention_sink = {0x1p100f, -0x1p100f};
    sinkmla_fast_equals_oracle("scaled", tiles(s, 4, DataFormat::Bfloat16, scale),
                               tiles(s, 5, DataFormat::Bfloat16, scale), tiles(s, 6, DataFormat::Bfloat16), nullptr, c);
  }
  std::vector<float> mv(64 * 64, 0.0f);
  for (int64_t j = 0; j < 64; ++j) mv[static_cast<size_t>(5 * 64 + j)] = -kInf;
  const TileTensor m = to_tile_layout(mv.data(), {1, 1, 64, 64}, DataFormat::Bfloat16);
  SdpaConfig c = sinkmla_latest(32, 32, false);
  c.attention_sink = {1.0f, -2.0f};
  sinkmla_fast_equals_oracle("masked row", tiles(s, 7, DataFormat::Bfloat16), tiles(s, 8, DataFormat::Bfloat16),
                             tiles(s, 9, DataFormat::Bfloat16), &m, c);
}

// The sink only enlarges the denominator, after the last chunk, by
// exp((sink - m) * scale) on the first-column exp: a sink far below every
// score adds an exact 0 (the same bits as no sink, whatever exp_approx_mode
// picks); a sink moves the output towards float64 attention with the sink
// as one more key of logit sink * scale and no value.
TEST(TtsimStreamingSink, EntersTheDenominatorOnly) {
  const Shape s{1, 2, 128, 64};
  const TileTensor q = tiles(s, 51, DataFormat::Bfloat16), k = tiles(s, 52, DataFormat::Bfloat16),
                   v = tiles(s, 53, DataFormat::Bfloat16);
  for (bool exp_approx : {true, false}) {
    SdpaConfig cfg = sinkmla_latest(32, 64);
    cfg.exp_approx_mode = exp_approx;
    TileTensor plain, far;
    tt_sdpa_streaming_oracle(q, k, v, nullptr, plain, cfg);
    cfg.attention_sink = {-0x1p60f, -0x1p99f};
    tt_sdpa_streaming_oracle(q, k, v, nullptr, far, cfg);
    EXPECT_TRUE(same_bits(far, plain)) << "exp_approx_mode " << exp_approx;
  }
  SdpaConfig sunk = sinkmla_latest(32, 64);
  sunk.compute.math_fidelity = MathFidelity::HiFi4;
  sunk.attention_sink = {8.0f, 24.0f};  // unscaled: logits 1 and 3 at dh 64
  TileTensor plain, out;
  tt_sdpa_streaming_oracle(q, k, v, nullptr, out, sunk);
  SdpaConfig none = sunk;
  none.attention_sink.clear();
  tt_sdpa_streaming_oracle(q, k, v, nullptr, plain, none);
  const std::vector<double> want = sinkmla_f64(q, k, v, 64, true, 0.125, sunk.attention_sink);
  const std::vector<double> got = sinkmla_values(out), base = sinkmla_values(plain);
  double maxerr = 0, moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    maxerr = std::max(maxerr, std::fabs(got[i] - want[i]));
    moved = std::max(moved, std::fabs(got[i] - base[i]));
  }
  EXPECT_LT(maxerr, 0.05);
  EXPECT_GT(moved, 0.1);  // the sink moved the output well beyond that error
  EXPECT_GT(pcc(got, want), 0.999);
}

// The factory gives the streaming kernel one sink tile (the per-head
// scalar; attention_sink_tile_count), the standard kernel one per q row tile.
TEST(TtsimStreamingSink, OneMoreTileOfBuffer) {
  const TileTensor t = make_tile_tensor({1, 2, 256, 64}, DataFormat::Bfloat16);
  SdpaConfig c = sinkmla_latest(128, 64);
  const int64_t without = sdpa_streaming_cb_bytes(t, t, t, nullptr, c);
  c.attention_sink = {1.0f, 2.0f};
  EXPECT_EQ(sdpa_streaming_cb_bytes(t, t, t, nullptr, c) - without, tile_bytes(DataFormat::Bfloat16));
}

// `mha op sdpa --option tt_metal=latest --option attention_sink=[...]` with
// a 16-bit Dst runs the streaming kernel: the oracle's bits, end to end.
TEST(TtsimStreamingSink, OpCliBitForBitWithTheOracle) {
  TempDir dir;
  const Tensor q = randn({1, 2, 96, 64}, 61), k = randn({1, 2, 96, 64}, 62), v = randn({1, 2, 96, 64}, 63);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}})
    io::write_npy(dir.file(std::string(name) + ".npy"), *t);
  const CommandResult r = run_mha("op sdpa " + shell_quote(dir.file("q.npy")) + " " + shell_quote(dir.file("k.npy")) +
                                  " " + shell_quote(dir.file("v.npy")) + " -o " + shell_quote(dir.file("o.npy")) +
                                  " --option tt_metal=latest --option q_chunk_size=64 --option k_chunk_size=32" +
                                  " --option 'attention_sink=[0.3,5]' --option threads=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SdpaConfig c = sinkmla_latest(64, 32);
  c.attention_sink = {0.30078125f, 5.0f};  // held as bf16
  TileTensor want;
  tt_sdpa_streaming_oracle(to_tile_layout(q, DataFormat::Bfloat16), to_tile_layout(k, DataFormat::Bfloat16),
                           to_tile_layout(v, DataFormat::Bfloat16), nullptr, want, c);
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), want));
}

// mha run of gpt-oss's full layer (its learned sinks through SDPA's
// attention_sink) at tt_metal latest: the streaming kernel with a 16-bit Dst
// tracks the cpu backend as sdpa_standard does with the recipe's fp32 Dst
// (measured: PCC 0.99976 and 0.99977 at 12 tokens, the sinks passed as
// sinks / scale as TT-NN's gpt-oss passes them, docs/TTSIM.md "gpt-oss").
TEST(TtsimStreamingSink, GptOssFullLayerAtLatestTracksCpu) {
  TempDir dir;
  const std::string folder = source_dir() + "/data/hf_gpt_oss_tiny";
  auto run = [&](const std::string& backend, const std::string& out) {
    write_text(dir.file("c.json"), "{\"model\": {\"hf\": \"" + folder + "\", \"layer\": 1}, \"inputs\": {\"seed\": 0, "
                                   "\"x\": {\"randn\": [1, 12, 64]}}, \"backend\": " + backend + "}");
    const CommandResult r = run_mha("run -c " + shell_quote(dir.file("c.json")) + " -n 0 -o " + shell_quote(out));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return io::read_tensor(out);
  };
  const Tensor want = run("\"cpu\"", dir.file("cpu.npy"));
  for (const char* dst : {"false", "true"}) {
    const Tensor got = run(std::string("{\"name\": \"tt-sim\", \"tt_metal\": \"latest\", \"fp32_dest_acc_en\": ") +
                               dst + "}",
                           dir.file("tt.npy"));
    EXPECT_GT(compare::compare(want, got, compare::Options{}).pcc, 0.99) << "fp32_dest_acc_en " << dst;
  }
}

// ---- flash MLA at tt_metal latest ----

// flash-mla-prefill at latest equals sdpa at latest given V = [K's first dv
// columns | zeros], cut to dv (every output column is its own accumulation
// and product), on both programs the factory picks, with padded lengths
// and DeepSeek-V3's widths.
TEST(FlashMlaLatest, EqualsSdpaWithTheKeysFirstColumnsOnBothPrograms) {
  struct C {
    Shape q, k;
    int64_t dv, qc, kc;
  };
  for (const C& c : {C{{1, 4, 64, 96}, {1, 1, 64, 96}, 64, 32, 32}, C{{2, 4, 100, 160}, {2, 2, 100, 160}, 128, 64, 32},
                     C{{1, 2, 64, 576}, {1, 1, 64, 576}, 512, 32, 64}})
    for (bool fp32 : {false, true})
      for (DataFormat kv : {DataFormat::Bfloat16, DataFormat::Bfp8_b}) {
        const Tensor q = randn(c.q, 1), k = randn(c.k, 2);
        nlohmann::ordered_json pc = {{"q_chunk_size", c.qc}, {"k_chunk_size", c.kc}};
        if (fp32) pc["fp32_dest_acc_en"] = true;
        nlohmann::ordered_json mla = pc;
        mla["head_dim_v"] = c.dv;
        const OpResult got = sinkmla_op("flash-mla-prefill", {q, k}, mla, kv);
        const Tensor want =
            columns(sinkmla_op("sdpa", {q, k, columns(k, c.dv, true)}, pc, kv).output, c.dv, false);
        EXPECT_TRUE(same_bits(got.output, want)) << shape_str(c.q) << " fp32 " << fp32 << " " << format_name(kv);
        EXPECT_EQ(got.info["head_dim_v"], c.dv);
      }
}

// flash MLA's fast path on both latest programs against their oracles, over
// the named cases (V = K's first head_dim_v columns).
void expect_flash_mla_latest_fast_equals_oracle(const std::vector<std::string>& names) {
  struct C {
    const char* name;
    Shape q, k;
    SdpaConfig cfg;
    DataFormat fk;
  };
  std::vector<C> cases;
  for (bool fp32 : {false, true}) {
    cases.push_back({"mqa", {1, 4, 64, 96}, {1, 1, 64, 96}, sinkmla_latest(32, 32, true, fp32), DataFormat::Bfloat16});
    cases.push_back({"gqa bfp8, padded", {2, 4, 100, 160}, {2, 2, 100, 160}, sinkmla_latest(64, 64, true, fp32),
                     DataFormat::Bfp8_b});
    cases.push_back({"non-causal, K longer and partial", {1, 2, 64, 96}, {1, 1, 150, 96},
                     sinkmla_latest(32, 64, false, fp32), DataFormat::Bfloat16});
    cases.push_back({"sbh 1 split", {1, 2, 64, 96}, {1, 1, 512, 96}, sinkmla_latest(32, 512, false, fp32),
                     DataFormat::Bfp4_b});
    cases.push_back({"deepseek widths", {1, 2, 64, 576}, {1, 1, 64, 576}, sinkmla_latest(32, 32, true, fp32),
                     DataFormat::Bfp8_b});
  }
  for (C& c : cases) {
    if (std::find(names.begin(), names.end(), c.name) == names.end()) continue;
    c.cfg.head_dim_v = c.q[3] == 576 ? 512 : c.q[3] == 160 ? 128 : 64;
    const TileTensor q = tiles(c.q, 11, DataFormat::Bfloat16), k = tiles(c.k, 12, c.fk);
    const TileTensor want = sinkmla_fast_equals_oracle(c.name, q, k, mla_value_of_key(k, c.cfg.head_dim_v), nullptr, c.cfg);
    EXPECT_EQ(want.shape, (Shape{c.q[0], c.q[1], c.q[2], c.cfg.head_dim_v})) << c.name;
  }
}

// MQA, GQA with bfloat8_b keys and padded lengths, non-causal with a
// partial last tile; the split keys and DeepSeek's widths (label `numeric`)
// in the test after.
TEST(FlashMlaLatest, FastEqualsOracle) {
  expect_flash_mla_latest_fast_equals_oracle({"mqa", "gqa bfp8, padded", "non-causal, K longer and partial"});
}

TEST(FlashMlaLatest, FastEqualsOracleWithSplitKeysAndDeepSeekWidths) {
  expect_flash_mla_latest_fast_equals_oracle({"sbh 1 split", "deepseek widths"});
}

// Prefill at DeepSeek-V3's widths (576 / 512), 4 heads x 128 tokens, on
// both latest programs: PCC above tt-metal's 0.99 for its flash MLA tests
// against float64 attention with V = K's first 512 columns.
TEST(FlashMlaLatest, TracksFloat64Attention) {
  const int64_t nh = 4, s = 128, dh = 576, dv = 512;
  const Tensor q = randn({1, nh, s, dh}, 21), k = randn({1, 1, s, dh}, 22);
  const TileTensor tq = to_tile_layout(q, DataFormat::Bfloat16), tk = to_tile_layout(k, DataFormat::Bfloat16);
  const std::vector<double> want = sinkmla_f64(tq, tk, tk, dv, true, 1.0 / std::sqrt(double(dh)));
  for (bool fp32 : {false, true}) {
    nlohmann::ordered_json o = {{"head_dim_v", dv}, {"q_chunk_size", 64}, {"k_chunk_size", 64}};
    if (fp32) o["fp32_dest_acc_en"] = true;
    const Tensor got = sinkmla_op("flash-mla-prefill", {q, k}, o).output;
    const double p = pcc(got.to_f64(), want);
    std::cout << "flash MLA at latest, fp32_dest_acc_en " << fp32 << ": PCC " << p << "\n";
    EXPECT_GT(p, 0.99) << "fp32 " << fp32;
  }
}

// chunked_flash_mla_prefill at latest: positions 64..127 over a shuffled
// paged latent cache equal chunked-sdpa at latest given V = [K[:dv] | 0],
// and the same rows of flash-mla-prefill at latest, on both programs.
TEST(FlashMlaLatest, ChunkedEqualsChunkedSdpaAndTheFullPrefillsRows) {
  const int64_t b = 2, S = 128, dh = 160, dv = 128, bs = 32, start = 64;
  const Tensor q = randn({b, 4, S, dh}, 51), k = randn({b, 1, S, dh}, 52);
  const PageTable table = {{5, 0, 7, 2}, {1, 6, 3, 4}};
  const Tensor kp = paged_cache(k, table, filled({8, 1, bs, dh}, 0.25f));
  const Tensor qchunk = positions(q, start, S);
  for (bool fp32 : {false, true}) {
    nlohmann::ordered_json opts = {{"page_table", table}, {"chunk_start_idx", start}, {"q_chunk_size", 32},
                                   {"k_chunk_size", 64}};
    nlohmann::ordered_json full_opts = {{"head_dim_v", dv}, {"q_chunk_size", 32}, {"k_chunk_size", 64}};
    if (fp32) opts["fp32_dest_acc_en"] = full_opts["fp32_dest_acc_en"] = true;
    nlohmann::ordered_json mla = opts;
    mla["head_dim_v"] = dv;
    const Tensor got = sinkmla_op("chunked-flash-mla-prefill", {qchunk, kp}, mla, DataFormat::Bfp8_b).output;
    const Tensor plain =
        sinkmla_op("chunked-sdpa", {qchunk, kp, columns(kp, dv, true)}, opts, DataFormat::Bfp8_b).output;
    EXPECT_TRUE(same_bits(got, columns(plain, dv, false))) << "fp32 " << fp32;
    const Tensor full = sinkmla_op("flash-mla-prefill", {q, k}, full_opts, DataFormat::Bfp8_b).output;
    EXPECT_TRUE(same_bits(got, positions(full, start, S))) << "fp32 " << fp32;
  }
}

// flash-mla-decode at latest equals sdpa-decode at latest with V = [K's
// first columns | 0], contiguous and paged (also in 16-row blocks: block
// padding), at 16 heads (half tiles) and 128 heads on one latent head.
TEST(FlashMlaLatest, DecodeEqualsSdpaDecodeWithTheKeysFirstColumns) {
  for (int64_t nh : {16, 128}) {
    const Tensor q = randn({1, 2, nh, 160}, 31), k = randn({2, 1, 128, 160}, 32);
    for (bool fp32 : {false, true}) {
      nlohmann::ordered_json pos = {{"cur_pos", {5, 100}}, {"k_chunk_size", 32}, {"max_cores_per_head_batch", 3}};
      if (fp32) pos["fp32_dest_acc_en"] = true;
      nlohmann::ordered_json mla = pos;
      mla["head_dim_v"] = 128;
      const Tensor got = sinkmla_op("flash-mla-decode", {q, k}, mla, DataFormat::Bfp8_b).output;
      const Tensor want = columns(
          sinkmla_op("sdpa-decode", {q, k, columns(k, 128, true)}, pos, DataFormat::Bfp8_b).output, 128, false);
      EXPECT_TRUE(same_bits(got, want)) << nh << " heads, fp32 " << fp32;
      for (int64_t bs : {32, 16}) {  // user u's block j at page_table[u][j]
        const int64_t nb = 128 / bs * 2;
        PageTable table(2);
        for (int64_t u = 0; u < 2; ++u)
          for (int64_t j = 0; j < 128 / bs; ++j)
            table[static_cast<size_t>(u)].push_back((j * 2 + u * 5 + 3) % nb);  // a permutation: 5 and 3 are odd
        const Tensor kp = paged_cache(k, table, filled({nb, 1, bs, 160}, 0.5f));
        nlohmann::ordered_json paged = mla, paged_pos = pos;
        paged["page_table"] = paged_pos["page_table"] = table;
        const Tensor p = sinkmla_op("flash-mla-decode", {q, kp}, paged, DataFormat::Bfp8_b).output;
        const Tensor pw = sinkmla_op("sdpa-decode", {q, kp, columns(kp, 128, true)}, paged_pos,
                                     DataFormat::Bfp8_b).output;
        EXPECT_TRUE(same_bits(p, columns(pw, 128, false))) << "blocks of " << bs << ", " << nh << " heads";
        // Whole-tile blocks read the contiguous cache's rows in its chunks.
        if (bs == 32) {
          EXPECT_TRUE(same_bits(p, got)) << "paged, " << nh << " heads, fp32 " << fp32;
        }
      }
    }
  }
}

TEST(FlashMlaLatest, DecodeFastEqualsOracle) {
  // DeepSeek-V3's widths and all 128 heads on one latent head.
  SdpaDecodeConfig cfg;
  cfg.head_dim_v = 512;
  cfg.k_chunk_size = 32;
  cfg.max_cores_per_head_batch = 4;
  cfg.compute.tt_metal = TtMetal::Latest;
  const TileTensor q = to_tile_layout(randn({1, 1, 128, 576}, 41), DataFormat::Bfloat16);
  const TileTensor k = to_tile_layout(randn({1, 1, 128, 576}, 42), DataFormat::Bfp8_b);
  for (bool fp32 : {false, true})
    for (bool exp_approx : {true, false}) {
      cfg.compute.fp32_dest_acc_en = fp32;
      cfg.exp_approx_mode = exp_approx;
      const TileTensor want = tt_sdpa_decode(q, k, k, {77}, nullptr, cfg, kOracle);
      EXPECT_EQ(want.shape, (Shape{1, 1, 128, 512}));
      static ThreadPool three(3);
      for (simd::Isa isa : simd::vector_isas())
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three})
          EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, k, {77}, nullptr, cfg, Exec{isa, pool}), want))
              << simd::isa_name(isa) << " fp32 " << fp32 << " exp_approx " << exp_approx;
    }
}

// TT-NN's causal-only MLA decode, in one line (non-causal decode runs at
// latest only, so this is where the check first bites).
TEST(FlashMlaLatest, RefusesInOneLine) {
  const Tensor q = randn({1, 1, 16, 96}, 1), k = randn({1, 1, 64, 96}, 2);
  try {
    sinkmla_op("flash-mla-decode", {q, k}, {{"head_dim_v", 64}, {"is_causal", false}, {"k_chunk_size", 32}});
    FAIL() << "ran";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "use_mla (head_dim_v) needs is_causal=true")) << e.what();
    EXPECT_FALSE(contains(e.what(), "\n")) << e.what();
  }
}

// `mha op flash-mla-prefill / flash-mla-decode --option tt_metal=latest`:
// the device operations' bits end to end, the report naming the profile.
TEST(FlashMlaLatest, CliRunsAtLatest) {
  TempDir dir;
  const Tensor q = randn({1, 2, 64, 96}, 71), k = randn({1, 1, 64, 96}, 72), qd = randn({1, 1, 16, 96}, 73);
  io::write_npy(dir.file("q.npy"), q);
  io::write_npy(dir.file("k.npy"), k);
  io::write_npy(dir.file("qd.npy"), qd);
  const std::string kq = " " + shell_quote(dir.file("k.npy")) + " -o " + shell_quote(dir.file("o.npy"));
  CommandResult r = run_mha("op flash-mla-prefill " + shell_quote(dir.file("q.npy")) + kq +
                            " --option head_dim_v=64 --option tt_metal=latest --option threads=2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"profile\": \"latest\"")) << r.out;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")),
                        sinkmla_op("flash-mla-prefill", {q, k}, {{"head_dim_v", 64}}).output));
  r = run_mha("op flash-mla-decode " + shell_quote(dir.file("qd.npy")) + kq +
              " --option head_dim_v=64 --cur-pos 40 --option tt_metal=latest --option threads=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")),
                        sinkmla_op("flash-mla-decode", {qd, k}, {{"head_dim_v", 64}, {"cur_pos", {40}}}).output));
}
