// chunked-sdpa (ttnn.transformer.chunked_scaled_dot_product_attention): bit
// for bit with plain causal SDPA where the two must agree (chunk start 0 on
// an identity page table; a chunk at an offset against the same rows of the
// full sequence's SDPA), the fast path against the oracle at an offset,
// TT-NN's refusals, and `mha op chunked-sdpa`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/simd/kernels.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;
using json = nlohmann::ordered_json;

namespace {

// Each user's sequence x [b, nkv, S, dh] cut into blocks of bs positions and
// stored at the blocks a page table names: identity (user u's block j at
// u * S / bs + j) for seed 0, else shuffled among `spare` more blocks than
// the users need (the unused ones hold noise).
struct Paged {
  Tensor cache;
  PageTable table;
};

Paged page(const Tensor& x, int64_t bs, uint32_t seed, int64_t spare = 0) {
  const int64_t b = x.dim(0), nkv = x.dim(1), S = x.dim(2), dh = x.dim(3), per = S / bs;
  std::vector<int64_t> ids(static_cast<size_t>(b * per + spare));
  std::iota(ids.begin(), ids.end(), 0);
  if (seed != 0) std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  PageTable table(static_cast<size_t>(b));
  for (int64_t u = 0; u < b; ++u)
    table[static_cast<size_t>(u)].assign(ids.begin() + u * per, ids.begin() + (u + 1) * per);
  return {paged_cache(x, table, randn({b * per + spare, nkv, bs, dh}, seed + 99)), table};
}

// One op through the library `mha op` calls: Q in bfloat16, K and V in kv.
Tensor run(const std::string& op, const Tensor& q, const Tensor& k, const Tensor& v, json opts,
           DataFormat kv = DataFormat::Bfloat16) {
  OpRequest r;
  r.op = op;
  r.inputs = {{"q", q, DataFormat::Bfloat16}, {"k", k, kv}, {"v", v, kv}};
  opts["threads"] = 2;
  r.options = opts;
  return run_tt_op(r).output;
}

json chunked(const PageTable& t, int64_t start, json o = json::object()) {
  o["page_table"] = t;
  o["chunk_start_idx"] = start;
  return o;
}

// The one-line InputError chunked-sdpa gives, or "" when it runs.
std::string refusal(const Tensor& q, const Tensor& k, const Tensor& v, const json& opts,
                    DataFormat qf = DataFormat::Bfloat16) {
  OpRequest r;
  r.op = "chunked-sdpa";
  r.inputs = {{"q", q, qf}, {"k", k, std::nullopt}, {"v", v, std::nullopt}};
  r.options = opts;
  try {
    run_tt_op(r);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ChunkedSdpa, StartZeroOnAnIdentityPageTableIsCausalSdpa) {
  const Tensor q = randn({2, 4, 128, 64}, 1), k = randn({2, 2, 128, 64}, 2), v = randn({2, 2, 128, 64}, 3);
  const Paged pk = page(k, 64, 0), pv = page(v, 64, 0);
  for (DataFormat kv : {DataFormat::Bfloat16, DataFormat::Bfp8_b})
    for (const auto& [qc, kc] : {std::pair<int, int>{32, 32}, {64, 128}, {128, 64}}) {
      const json pc = {{"q_chunk_size", qc}, {"k_chunk_size", kc}};
      const Tensor want = run("sdpa", q, k, v, pc, kv);
      EXPECT_TRUE(same_bits(run("chunked-sdpa", q, pk.cache, pv.cache, chunked(pk.table, 0, pc), kv), want))
          << format_name(kv) << " q/k " << qc << "/" << kc;
      // The same cache in shuffled blocks: only the page table differs.
      const Paged sk = page(k, 64, 5, 3), sv = page(v, 64, 5, 3);
      EXPECT_TRUE(same_bits(run("chunked-sdpa", q, sk.cache, sv.cache, chunked(sk.table, 0, pc), kv), want));
    }
}

// At `profile`: the fp32-Dst cases run sdpa_standard at latest, the others
// the streaming kernel.
void expect_offset_chunks_match_full_sdpa(const char* profile) {
  // One user of 256 positions, GQA; a shuffled cache with spare blocks.
  const Tensor q = randn({1, 4, 256, 64}, 11), k = randn({1, 2, 256, 64}, 12), v = randn({1, 2, 256, 64}, 13);
  const Paged pk = page(k, 32, 7, 2), pv = page(v, 32, 7, 2);
  struct Case {
    int qc, kc, start, s;
    json compute;
    DataFormat kv;
  };
  const json hifi4 = {{"math_fidelity", "HiFi4"}, {"fp32_dest_acc_en", true}, {"math_approx_mode", false}};
  // The full SDPA runs over the prefix the chunk's last k chunk reaches
  // (160 -> 256 at k chunks of 128: keys the causal mask hides, which the
  // chunked reader pads with zeros and the full SDPA holds real values of).
  for (const Case& c : {Case{32, 32, 64, 64, json::object(), DataFormat::Bfloat16},
                        Case{64, 32, 128, 64, hifi4, DataFormat::Bfloat16},
                        Case{32, 64, 192, 64, json::object(), DataFormat::Bfp8_b},
                        Case{32, 128, 128, 32, json{{"exp_approx_mode", false}}, DataFormat::Bfloat16}}) {
    json pc = c.compute;
    pc["tt_metal"] = profile;
    pc["q_chunk_size"] = c.qc;
    pc["k_chunk_size"] = c.kc;
    const int64_t len = (c.start + c.s + c.kc - 1) / c.kc * c.kc;
    const Tensor full = run("sdpa", positions(q, 0, len), positions(k, 0, len), positions(v, 0, len), pc, c.kv);
    const Tensor got = run("chunked-sdpa", positions(q, c.start, c.start + c.s), pk.cache, pv.cache,
                           chunked(pk.table, c.start, pc), c.kv);
    EXPECT_TRUE(same_bits(got, positions(full, c.start, c.start + c.s)))
        << profile << " q/k " << c.qc << "/" << c.kc << " at " << c.start << " + " << c.s;
  }
}

TEST(ChunkedSdpa, ChunkAtAnOffsetIsTheSameRowsOfTheFullCausalSdpa) { expect_offset_chunks_match_full_sdpa("2024"); }

TEST(ChunkedSdpa, ChunkAtAnOffsetIsTheSameRowsOfTheFullCausalSdpaAtLatest) {
  expect_offset_chunks_match_full_sdpa("latest");
}

// Both latest programs on gathered keys (positions [128, 192) of Q, keys
// to the last k chunk's end): the fast path on both ISAs, 1 and 3 threads,
// against the oracle, over the given q/k chunk sizes and both compute configs.
void expect_latest_fast_path_equals_oracle_at_an_offset(const std::vector<std::pair<int, int>>& chunk_sizes) {
  const TileTensor q = to_tile_layout(randn({2, 4, 64, 64}, 41), DataFormat::Bfloat16);
  auto keys = [](int64_t len, uint32_t seed) { return to_tile_layout(randn({2, 2, len, 64}, seed), DataFormat::Bfp8_b); };
  static ThreadPool three(3);
  for (bool fp32 : {false, true})
    for (const auto& [qc, kc] : chunk_sizes) {
      SdpaConfig cfg;
      cfg.q_chunk_size = qc;
      cfg.k_chunk_size = kc;
      cfg.compute.tt_metal = TtMetal::Latest;
      cfg.compute.fp32_dest_acc_en = fp32;
      cfg.compute.math_fidelity = fp32 ? MathFidelity::HiFi4 : MathFidelity::HiFi2;
      const int64_t len = (192 + kc - 1) / kc * kc;
      const TileTensor k = keys(len, 42), v = keys(len, 43);
      TileTensor want;
      if (fp32) tt_sdpa_standard_oracle(q, k, v, nullptr, want, cfg, 128);
      else tt_sdpa_streaming_oracle(q, k, v, nullptr, want, cfg, 128);
      for (simd::Isa isa : {simd::Isa::Avx2, simd::Isa::Avx512}) {
        if (!simd::kernels_for(isa)) continue;
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
          TileTensor got;
          if (fp32) tt_sdpa_standard(q, k, v, nullptr, got, cfg, Exec{isa, pool}, 128);
          else tt_sdpa_streaming(q, k, v, nullptr, got, cfg, Exec{isa, pool}, 128);
          ASSERT_EQ(got.data.size(), want.data.size());
          EXPECT_EQ(std::memcmp(got.data.data(), want.data.data(), 4 * want.data.size()), 0)
              << simd::isa_name(isa) << (fp32 ? " standard" : " streaming") << " q/k " << qc << "/" << kc;
        }
      }
      // The offset moves the causal bounds: at 0 over the first 64 keys the
      // rows differ.
      if (kc > 64) continue;
      TileTensor at0;
      if (fp32) tt_sdpa_standard_oracle(q, keys(64, 42), keys(64, 43), nullptr, at0, cfg);
      else tt_sdpa_streaming_oracle(q, keys(64, 42), keys(64, 43), nullptr, at0, cfg);
      EXPECT_NE(std::memcmp(at0.data.data(), want.data.data(), 4 * want.data.size()), 0);
    }
}

// One chunking here; the others are label `numeric` (tests/CMakeLists.txt).
TEST(ChunkedSdpa, LatestKernelsFastPathEqualsOracleAtAnOffset) {
  expect_latest_fast_path_equals_oracle_at_an_offset({{32, 128}});
}

TEST(ChunkedSdpa, LatestKernelsFastPathEqualsOracleAtAnOffsetOverMoreChunkings) {
  expect_latest_fast_path_equals_oracle_at_an_offset({{64, 64}, {32, 32}});
}

TEST(ChunkedSdpa, FastPathEqualsOracleAtAnOffset) {
  // The kernel on keys already gathered: Q holds the positions [128, 192),
  // K and V the positions from 0 to the last k chunk's end.
  const TileTensor q = to_tile_layout(randn({2, 4, 64, 64}, 21), DataFormat::Bfloat16);
  auto keys = [](int64_t len, uint32_t seed) { return to_tile_layout(randn({2, 2, len, 64}, seed), DataFormat::Bfp8_b); };
  for (const auto& [qc, kc] : {std::pair<int, int>{32, 128}, {64, 64}}) {
    SdpaConfig cfg;
    cfg.q_chunk_size = qc;
    cfg.k_chunk_size = kc;
    const int64_t len = (192 + kc - 1) / kc * kc;
    const TileTensor k = keys(len, 22), v = keys(len, 23);
    TileTensor want;
    tt_sdpa_oracle(q, k, v, nullptr, want, cfg, 128);
    for (simd::Isa isa : {simd::Isa::Avx2, simd::Isa::Avx512}) {
      if (!simd::kernels_for(isa)) continue;
      static ThreadPool three(3);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
        TileTensor got;
        tt_sdpa(q, k, v, nullptr, got, cfg, Exec{isa, pool}, 128);
        ASSERT_EQ(got.data.size(), want.data.size());
        EXPECT_EQ(std::memcmp(got.data.data(), want.data.data(), 4 * want.data.size()), 0)
            << simd::isa_name(isa) << " q/k " << qc << "/" << kc;
      }
    }
  }
  // The offset moves the causal bounds: the same Q and keys at 0 and at 64
  // (K and V of 128 positions) give other rows.
  SdpaConfig cfg;
  const TileTensor k = keys(128, 22), v = keys(128, 23);
  TileTensor at64, at0;
  tt_sdpa_oracle(q, k, v, nullptr, at64, cfg, 64);
  tt_sdpa_oracle(q, keys(64, 22), keys(64, 23), nullptr, at0, cfg);
  EXPECT_NE(std::memcmp(at0.data.data(), at64.data.data(), 4 * at0.data.size()), 0);
}

TEST(ChunkedSdpa, RefusesWhatTtnnRefusesInOneLine) {
  const Tensor q = randn({1, 4, 64, 64}, 1), k = randn({4, 2, 64, 64}, 2);
  const PageTable t = {{0, 1, 2, 3}};  // 256 positions
  const json pc = {{"q_chunk_size", 32}, {"k_chunk_size", 64}};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {refusal(q, k, k, chunked(t, 96, pc)), "not a multiple of k_chunk_size 64"},
      {refusal(q, k, k, chunked(t, 48, pc)), "not a multiple of q_chunk_size 32"},
      {refusal(q, k, k, chunked(t, -64, pc)), "expected a position >= 0"},
      {refusal(q, k, k, chunked({{0, 1}}, 128, pc)), "maps 128 positions per user, fewer than chunk_start_idx + s = 192"},
      {refusal(q, k, k, chunked({{0, 1, 2, 3}, {0, 1, 2, 3}}, 0, pc)), "has 2 rows, expected one per user"},
      {refusal(q, k, k, chunked({{0, 1, 2, 9}}, 0, pc)), "page_table[0, 3] = 9 is outside the cache's 4 blocks"},
      {refusal(q, randn({4, 2, 48, 64}, 2), randn({4, 2, 48, 64}, 2), chunked(t, 0, pc)), "not a multiple of 32"},
      {refusal(q, k, randn({4, 2, 64, 32}, 3), chunked(t, 0, pc)), "expected K and V of one shape"},
      {refusal(q, randn({4, 3, 64, 64}, 2), randn({4, 3, 64, 64}, 2), chunked(t, 0, pc)), "multiple of nkv"},
      {refusal(q, k, k, chunked(t, 0, pc), DataFormat::Float32), "Q is float32"},
      {refusal(q, k, k, json{{"page_table", t}}), "--chunk-start-idx (the chunk_start_idx param) is required"},
      {refusal(q, k, k, json{{"chunk_start_idx", 0}}), "--page-table (the page_table param) is required"},
      {refusal(q, k, k, chunked({{0, -1, 2, 3}}, 0, pc)), "non-negative integers"},
      {refusal(q, k, k, chunked(t, 0, json{{"is_causal", false}})), "unknown"},
      {refusal(q, k, k, chunked(t, 64, json{{"k_chunk_size", 64}, {"tt_metal", "latest"}}), DataFormat::Float32),
       "Q is float32"},
      {refusal(q, k, k, chunked(t, 96, json{{"q_chunk_size", 32}, {"k_chunk_size", 64}, {"tt_metal", "latest"}})),
       "not a multiple of k_chunk_size 64"},
  };
  for (const auto& [msg, want] : cases) {
    EXPECT_NE(msg.find(want), std::string::npos) << "'" << msg << "' lacks '" << want << "'";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_EQ(refusal(q, k, k, chunked(t, 64, pc)), "");  // the same operands at a valid start run
  for (bool fp32 : {false, true}) {  // and at latest, on either program
    json lp = pc;
    lp["tt_metal"] = "latest";
    lp["fp32_dest_acc_en"] = fp32;
    EXPECT_EQ(refusal(q, k, k, chunked(t, 64, lp)), "") << fp32;
  }
}

TEST(ChunkedSdpa, MhaOpCli) {
  TempDir dir;
  const Tensor q = randn({1, 2, 64, 64}, 31), k = randn({1, 1, 192, 64}, 32), v = randn({1, 1, 192, 64}, 33);
  const Paged pk = page(k, 64, 3, 1), pv = page(v, 64, 3, 1);
  std::vector<int32_t> ids;
  for (int64_t id : pk.table[0]) ids.push_back(static_cast<int32_t>(id));
  Tensor table(DType::I32, {1, static_cast<int64_t>(ids.size())});
  std::memcpy(table.data<int32_t>(), ids.data(), 4 * ids.size());
  io::write_npy(dir.file("q.npy"), positions(q, 0, 64));
  io::write_npy(dir.file("k.npy"), pk.cache);
  io::write_npy(dir.file("v.npy"), pv.cache);
  io::write_npy(dir.file("pt.npy"), table);
  const std::string in = shell_quote(dir.file("q.npy")) + " " + shell_quote(dir.file("k.npy")) + " " +
                         shell_quote(dir.file("v.npy")) + " --page-table " + shell_quote(dir.file("pt.npy"));
  const std::string out = " -o " + shell_quote(dir.file("o.npy"));
  CommandResult r = run_mha("op chunked-sdpa " + in + " --chunk-start-idx 128" + out +
                            " --in1-dtype bfloat8_b --in2-dtype bfloat8_b --option q_chunk_size=64 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json pc = {{"q_chunk_size", 64}};
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")),
                        run("chunked-sdpa", q, pk.cache, pv.cache, chunked(pk.table, 128, pc), DataFormat::Bfp8_b)));
  const json j = json::parse(r.out);
  EXPECT_EQ(j["chunk_start_idx"], 128);
  EXPECT_EQ(j["is_causal"], true);
  EXPECT_EQ(j["program_config"]["q_chunk_size"], 64);
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "HiFi2");
  // Bad input: exit 2, one line, nothing written.
  std::remove(dir.file("o.npy").c_str());
  r = run_mha("op chunked-sdpa " + in + " --chunk-start-idx 96" + out + " --option q_chunk_size=64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a multiple of q_chunk_size 64"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good());
  r = run_mha("op sdpa " + shell_quote(dir.file("q.npy")) + " " + shell_quote(dir.file("q.npy")) + " " +
              shell_quote(dir.file("q.npy")) + " --chunk-start-idx 0" + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sdpa does not take it"), std::string::npos) << r.err;
}
