// flash-mla-prefill and flash-mla-decode (ttnn.transformer.flash_mla_prefill,
// flash_multi_latent_attention_decode): SDPA's and SDPA decode's device
// operations with use_mla, V read from K's first head_dim_v columns. Checked
// bit for bit against the plain ops given V = [K's first head_dim_v columns |
// zeros] (every output column is its own accumulation, so the zero columns
// change nothing and are cut off), the fast paths against the lane-model
// oracles, accuracy against float64 attention, and TT-NN's refusals. Every
// op here runs the 2024 kernels unless the test names a profile
// (latest_sink_mla_test.cpp checks flash MLA at latest, the default).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim_test_util.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "util/thread_pool.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;
using json = nlohmann::ordered_json;

namespace {

// Flash MLA's 2024 kernels unless the test names a profile.
OpResult run_op(const std::string& op, const std::vector<Tensor>& in, const json& opts,
                DataFormat kv = DataFormat::Bfloat16) {
  return run_device_op(op, in, opts, kv, "2024");
}

// The one-line InputError of an op call, or "" when it runs.
std::string refusal(const std::string& op, std::vector<Tensor> in, const json& opts,
                    DataFormat qf = DataFormat::Bfloat16) {
  OpRequest r;
  r.op = op;
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < in.size(); ++i) r.inputs.push_back({names[i], in[i], i == 0 ? qf : DataFormat::Bfloat16});
  r.options = opts;
  if (!opts.contains("tt_metal")) r.options["tt_metal"] = "2024";
  try {
    run_tt_op(r);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

SdpaConfig mla_cfg(int64_t qc, int64_t kc, int64_t dv, bool causal = true) {
  SdpaConfig c;
  c.compute.tt_metal = TtMetal::R2024;
  c.q_chunk_size = qc;
  c.k_chunk_size = kc;
  c.is_causal = causal;
  c.head_dim_v = dv;
  return c;
}


}  // namespace

TEST(FlashMlaPrefill, EqualsSdpaWithTheKeysFirstColumnsAsValues) {
  struct C {
    Shape q, k;
    int64_t dv, qc, kc;
  };
  // MQA as DeepSeek runs it (one latent head), GQA, and DeepSeek-V3's
  // widths (576 = 512 + 64, V 512).
  for (const C& c : {C{{1, 4, 64, 96}, {1, 1, 64, 96}, 64, 32, 32}, C{{2, 4, 128, 160}, {2, 2, 128, 160}, 128, 64, 32},
                     C{{1, 2, 64, 576}, {1, 1, 64, 576}, 512, 32, 64}})
    for (DataFormat kv : {DataFormat::Bfloat16, DataFormat::Bfp8_b}) {
      const Tensor q = randn(c.q, 1), k = randn(c.k, 2);
      const json pc = {{"q_chunk_size", c.qc}, {"k_chunk_size", c.kc}};
      json mla = pc;
      mla["head_dim_v"] = c.dv;
      const OpResult got = run_op("flash-mla-prefill", {q, k}, mla, kv);
      const Tensor want = columns(run_op("sdpa", {q, k, columns(k, c.dv, true)}, pc, kv).output, c.dv, false);
      EXPECT_TRUE(same_bits(got.output, want)) << shape_str(c.q) << " " << format_name(kv);
      EXPECT_EQ(got.info["head_dim_v"], c.dv);
    }
}

TEST(FlashMlaPrefill, NonCausalWithAMaskEqualsSdpa) {
  const Tensor q = randn({1, 4, 64, 96}, 3), k = randn({1, 1, 128, 96}, 4);
  std::vector<float> mv(64 * 128);
  std::mt19937 g(5);
  for (float& x : mv) x = (g() & 1) ? -1e9f : 0.0f;
  const Tensor m = Tensor::from_f32({1, 1, 64, 128}, mv);
  OpRequest a, b;
  a.op = "flash-mla-prefill";
  a.inputs = {{"q", q, DataFormat::Bfloat16}, {"k", k, DataFormat::Bfloat16}, {"m", m, DataFormat::Bfp4_b}};
  a.options = {{"head_dim_v", 64}, {"is_causal", false}, {"threads", 2}, {"tt_metal", "2024"}};
  b.op = "sdpa";
  b.inputs = {{"q", q, DataFormat::Bfloat16}, {"k", k, DataFormat::Bfloat16},
              {"v", columns(k, 64, true), DataFormat::Bfloat16}, {"m", m, DataFormat::Bfp4_b}};
  b.options = {{"is_causal", false}, {"threads", 2}, {"tt_metal", "2024"}};
  EXPECT_TRUE(same_bits(run_tt_op(a).output, columns(run_tt_op(b).output, 64, false)));
}

TEST(FlashMlaPrefill, FastEqualsOracle) {
  struct C {
    const char* name;
    Shape q, k;
    SdpaConfig cfg;
    DataFormat fk;
  };
  SdpaConfig hifi4 = mla_cfg(64, 32, 128);
  hifi4.compute.math_fidelity = MathFidelity::HiFi4;
  hifi4.compute.fp32_dest_acc_en = true;
  SdpaConfig bfp8_out = mla_cfg(32, 32, 64);
  bfp8_out.compute.output = DataFormat::Bfp8_b;
  const std::vector<C> cases = {
      {"mqa", {1, 4, 64, 96}, {1, 1, 64, 96}, mla_cfg(32, 32, 64), DataFormat::Bfloat16},
      {"gqa bfp8", {2, 4, 128, 160}, {2, 2, 128, 160}, mla_cfg(64, 64, 128), DataFormat::Bfp8_b},
      {"hifi4 fp32", {1, 2, 128, 160}, {1, 1, 128, 160}, hifi4, DataFormat::Bfp8_b},
      {"non-causal, K longer", {1, 2, 64, 96}, {1, 1, 128, 96}, mla_cfg(32, 64, 32, false), DataFormat::Bfloat16},
      {"bfp8 out", {1, 2, 64, 96}, {1, 1, 64, 96}, bfp8_out, DataFormat::Bfp4_b},
      {"deepseek widths", {1, 2, 64, 576}, {1, 1, 64, 576}, mla_cfg(32, 32, 512), DataFormat::Bfp8_b},
  };
  for (const C& c : cases) {
    const TileTensor q = to_tile_layout(randn(c.q, 11), DataFormat::Bfloat16), k = to_tile_layout(randn(c.k, 12), c.fk);
    const TileTensor v = mla_value_of_key(k, c.cfg.head_dim_v);
    TileTensor want;
    tt_sdpa_oracle(q, k, v, nullptr, want, c.cfg);
    EXPECT_EQ(want.shape, (Shape{c.q[0], c.q[1], c.q[2], c.cfg.head_dim_v})) << c.name;
    for (simd::Isa isa : simd::vector_isas()) {
      static ThreadPool three(3);  // results never depend on the thread count
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
        TileTensor got;
        tt_sdpa(q, k, v, nullptr, got, c.cfg, Exec{isa, pool});
        EXPECT_TRUE(same_bits(got, want)) << c.name << " on " << simd::isa_name(isa);
      }
    }
  }
}

// The latent values as the device holds them, against float64 attention
// with V = K's first columns: PCC above tt-metal's 0.99 for its flash MLA
// tests (bfloat16 inputs; the kernel keeps every intermediate in bf16).
TEST(FlashMlaPrefill, TracksFloat64Attention) {
  const int64_t nh = 4, s = 128, dh = 576, dv = 512;
  const Tensor q = randn({1, nh, s, dh}, 21), k = randn({1, 1, s, dh}, 22);
  const TileTensor tq = to_tile_layout(q, DataFormat::Bfloat16), tk = to_tile_layout(k, DataFormat::Bfloat16);
  const Tensor got = run_op("flash-mla-prefill", {q, k}, {{"head_dim_v", dv}, {"q_chunk_size", 64}, {"k_chunk_size", 64}}).output;
  const std::vector<float> qv = to_row_major(tq), kv = to_row_major(tk);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> want, have;
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> w(static_cast<size_t>(i + 1));
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double d = 0;
        for (int64_t c = 0; c < dh; ++c) d += static_cast<double>(qv[(h * s + i) * dh + c]) * kv[j * dh + c];
        w[j] = d * scale;
        m = std::max(m, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - m));
      for (int64_t c = 0; c < dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j <= i; ++j) o += w[j] * kv[j * dh + c];
        want.push_back(o / sum);
        have.push_back(got.data<float>()[(h * s + i) * dv + c]);
      }
    }
  EXPECT_GT(pcc(have, want), 0.99);
}

TEST(FlashMlaPrefill, RefusesInOneLine) {
  const Tensor q = randn({1, 4, 64, 96}, 1), k = randn({1, 1, 64, 96}, 2);
  const auto expect = [](const std::string& got, const std::string& needle) {
    EXPECT_NE(got.find(needle), std::string::npos) << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  };
  expect(refusal("flash-mla-prefill", {q, k}, json::object()), "head_dim_v=N");
  expect(refusal("flash-mla-prefill", {q, k}, {{"head_dim_v", 48}}), "head_dim_v: expected a multiple of 32");
  expect(refusal("flash-mla-prefill", {q, k}, {{"head_dim_v", 128}}), "at most Q's and K's head dim 96");
  expect(refusal("flash-mla-prefill", {q, randn({1, 1, 96, 96}, 3)}, {{"head_dim_v", 64}}), "causal SDPA needs");
  expect(refusal("flash-mla-prefill", {q, randn({1, 3, 64, 96}, 3)}, {{"head_dim_v", 64}}), "multiple of nkv");
  expect(refusal("flash-mla-prefill", {q, k}, {{"head_dim_v", 64}}, DataFormat::Float32), "Q is float32");
  expect(refusal("flash-mla-prefill", {q, randn({64, 96}, 3)}, {{"head_dim_v", 64}}), "4-D");
  expect(refusal("flash-mla-prefill", {q, k}, {{"head_dim_v", 64}, {"sliding_window_size", 8}}),
         "sliding_window_size");
}

// chunked_flash_mla_prefill: positions 64..127 of two users against a
// shuffled paged latent cache equal chunked-sdpa given V = [K[:dv] | 0]
// (the same paged rows), and the same rows of flash-mla-prefill over the
// whole sequence (chunk start 64 with chunks of 32 and 64, as chunked SDPA's
// own test relates them).
TEST(FlashMlaPrefill, ChunkedEqualsChunkedSdpaAndTheFullPrefillsRows) {
  const int64_t b = 2, S = 128, dh = 160, dv = 128, bs = 32, start = 64;
  const Tensor q = randn({b, 4, S, dh}, 51), k = randn({b, 1, S, dh}, 52);
  const PageTable table = {{5, 0, 7, 2}, {1, 6, 3, 4}};
  const Tensor kp = paged_cache(k, table, filled({8, 1, bs, dh}, 0.25f));
  const Tensor qchunk = positions(q, start, S);
  for (DataFormat kv : {DataFormat::Bfloat16, DataFormat::Bfp8_b}) {
    const json opts = {{"page_table", table}, {"chunk_start_idx", start}, {"q_chunk_size", 32}, {"k_chunk_size", 64}};
    json mla = opts;
    mla["head_dim_v"] = dv;
    const Tensor got = run_op("chunked-flash-mla-prefill", {qchunk, kp}, mla, kv).output;
    EXPECT_TRUE(same_bits(got, columns(run_op("chunked-sdpa", {qchunk, kp, columns(kp, dv, true)}, opts, kv).output,
                                       dv, false)))
        << format_name(kv);
    const Tensor full = run_op("flash-mla-prefill", {q, k}, {{"head_dim_v", dv}, {"q_chunk_size", 32},
                                                             {"k_chunk_size", 64}}, kv).output;
    EXPECT_TRUE(same_bits(got, positions(full, start, S))) << format_name(kv);
  }
  EXPECT_NE(refusal("chunked-flash-mla-prefill", {qchunk, kp}, {{"page_table", table}, {"chunk_start_idx", start}})
                .find("head_dim_v=N"),
            std::string::npos);
}

TEST(FlashMlaDecode, EqualsSdpaDecodeWithTheKeysFirstColumnsAsValues) {
  // Two users, 16 query heads on one latent head, positions inside the
  // first chunk and past it; then the same caches paged in shuffled blocks.
  const Tensor q = randn({1, 2, 16, 160}, 31), k = randn({2, 1, 128, 160}, 32);
  for (DataFormat kv : {DataFormat::Bfloat16, DataFormat::Bfp8_b}) {
    const json pos = {{"cur_pos", {5, 100}}, {"k_chunk_size", 32}, {"max_cores_per_head_batch", 3}};
    json mla = pos;
    mla["head_dim_v"] = 128;
    const Tensor got = run_op("flash-mla-decode", {q, k}, mla, kv).output;
    const Tensor want = columns(run_op("sdpa-decode", {q, k, columns(k, 128, true)}, pos, kv).output, 128, false);
    EXPECT_TRUE(same_bits(got, want)) << format_name(kv);
    // Paged: user u's block j at page_table[u][j] among 8 blocks of 32.
    const PageTable table = {{6, 1, 4, 3}, {0, 7, 2, 5}};
    json paged = mla;
    paged["page_table"] = table;
    const OpResult p = run_op("flash-mla-decode", {q, paged_cache(k, table, filled({8, 1, 32, 160}, 0.5f))}, paged, kv);
    EXPECT_TRUE(same_bits(p.output, got)) << "paged " << format_name(kv);
    EXPECT_NE(p.info["programs"].dump().find("paged_flash_multi_latent_attention_decode"), std::string::npos);
  }
}

TEST(FlashMlaDecode, FastEqualsOracle) {
  // DeepSeek-V3's widths and all 128 heads on one latent head.
  SdpaDecodeConfig cfg;
  cfg.compute.tt_metal = TtMetal::R2024;
  cfg.head_dim_v = 512;
  cfg.k_chunk_size = 32;
  cfg.max_cores_per_head_batch = 4;
  const TileTensor q = to_tile_layout(randn({1, 1, 128, 576}, 41), DataFormat::Bfloat16);
  const TileTensor k = to_tile_layout(randn({1, 1, 128, 576}, 42), DataFormat::Bfp8_b);
  for (bool fp32 : {false, true}) {
    cfg.compute.fp32_dest_acc_en = fp32;
    const TileTensor want = tt_sdpa_decode(q, k, k, {77}, nullptr, cfg, kOracle);
    EXPECT_EQ(want.shape, (Shape{1, 1, 128, 512}));
    for (simd::Isa isa : simd::vector_isas()) {
      static ThreadPool three(3);
      EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, k, {77}, nullptr, cfg, Exec{isa, &three}), want))
          << simd::isa_name(isa) << " fp32 " << fp32;
    }
  }
}

TEST(FlashMlaDecode, RefusesInOneLine) {
  const Tensor q = randn({1, 1, 16, 96}, 1), k = randn({1, 1, 64, 96}, 2);
  EXPECT_NE(refusal("flash-mla-decode", {q, k}, {{"cur_pos", {3}}}).find("head_dim_v=N"), std::string::npos);
  EXPECT_NE(refusal("flash-mla-decode", {q, k}, {{"cur_pos", {3}}, {"head_dim_v", 40}}).find("multiple of 32"),
            std::string::npos);
  EXPECT_NE(refusal("flash-mla-decode", {q, k}, {{"cur_pos", {3}}, {"head_dim_v", 128}}).find("at most K's head dim"),
            std::string::npos);
  EXPECT_NE(refusal("flash-mla-decode", {q, k}, {{"head_dim_v", 64}}).find("--cur-pos"), std::string::npos);
  EXPECT_NE(refusal("flash-mla-decode", {q, k, k}, {{"cur_pos", {3}}, {"head_dim_v", 64}}).find("flash-mla-decode"),
            std::string::npos);
}

TEST(FlashMlaCli, RunsAndRefusesWithExitCode2) {
  TempDir dir;
  const Tensor q = randn({1, 2, 64, 96}, 1), k = randn({1, 1, 64, 96}, 2);
  io::write_npy(dir.file("q.npy"), q);
  io::write_npy(dir.file("k.npy"), k);
  const std::string in = shell_quote(dir.file("q.npy")) + " " + shell_quote(dir.file("k.npy"));
  CommandResult r = run_mha("op flash-mla-prefill " + in + " -o " + shell_quote(dir.file("o.npy")) +
                            " --option head_dim_v=64 --option threads=2 --option tt_metal=2024");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")),
                        run_op("flash-mla-prefill", {q, k}, {{"head_dim_v", 64}}).output));
  expect_input_error(run_mha("op flash-mla-prefill " + in + " -o " + shell_quote(dir.file("p.npy")) +
                             " --option head_dim_v=100 --option tt_metal=2024"),
                     "head_dim_v");
  expect_input_error(run_mha("op flash-mla-decode " + in + " -o " + shell_quote(dir.file("p.npy")) +
                             " --option head_dim_v=64 --cur-pos 3 --option tt_metal=2024"),
                     "batch");
}
