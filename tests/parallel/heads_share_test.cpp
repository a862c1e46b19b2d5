// The bitwise claim of head-parallel runs, in one process: a spec's heads
// split into shares (parallel/head_parallel.h), each share run on its own,
// the contexts put side by side and projected with Backend::project_output
// give the one-process output bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/cpu_plan.h"
#include "config/config.h"
#include "head_configs.h"
#include "parallel/head_parallel.h"
#include "run/runner.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return ::testing::AssertionFailure() << "dtype or shape differ";
  const std::size_t es = dtype_size(a.dtype());
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.raw() + i * es, b.raw() + i * es, es))
      return ::testing::AssertionFailure() << "first difference at element " << i << " of " << a.numel() << ": "
                                           << a.get_f64(i) << " vs " << b.get_f64(i);
  return ::testing::AssertionSuccess();
}

// context [B, L, H*dv] from shares [B, L, E_r], in share order.
Tensor side_by_side(const std::vector<Tensor>& parts) {
  const Tensor& p0 = parts[0];
  const int64_t rows = p0.dim(0) * p0.dim(1), n = static_cast<int64_t>(parts.size());
  const std::size_t width = p0.dim(2) * dtype_size(p0.dtype());
  Tensor c(p0.dtype(), {p0.dim(0), p0.dim(1), p0.dim(2) * n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < rows; ++i) std::memcpy(c.raw() + (i * n + r) * width, parts[r].raw() + i * width, width);
  return c;
}


// Bitwise on both backends. The cpu backend's holds because, asked for
// grouped projections (RunOptions::group_projections, as every head-parallel
// rank asks), it makes the same OpenBLAS calls for a group of heads whatever
// other heads the spec has (one per key/value group's [Wq_g; Wk_g; Wv_g],
// rows cut in the same batch groups: cpu_projection.h, cpu_plan.h); a share's
// calls are then one process's calls for its groups.
// `whole_threads` (0: `threads`) runs the one-process pass: the cpu
// backend's bits do not depend on its thread count either.
void check(const std::string& backend_name, const std::string& json, int64_t parts, int threads, int whole_threads = 0) {
  PreparedRun run = prepare_run(parse_config(ordered_json::parse(json), ".", "heads_share"));
  auto make = [&](int t) {
    ordered_json o = ordered_json::object();
    if (backend_name == "cpu") o["threads"] = t;
    return make_backend(backend_name, o, "backend");
  };
  auto backend = make(threads);
  RunOptions grouped;  // as run_heads asks on every rank, and so a one-rank run
  grouped.group_projections = true;
  const Tensor whole = make(whole_threads ? whole_threads : threads)->run(run.spec, run.inputs, grouped).output;
  std::vector<Tensor> ctx;
  for (int64_t r = 0; r < parts; ++r)
    ctx.push_back(backend
                      ->run(parallel::heads_share(run.spec, r, parts),
                            parallel::inputs_share(run.spec, run.inputs, r, parts), grouped)
                      .output);
  const Tensor out = *backend->project_output(run.spec, side_by_side(ctx));
  EXPECT_TRUE(bitwise_equal(out, whole)) << backend_name << " " << parts << " shares, " << threads << " threads: " << json;
}

std::string llama(int64_t hidden, int64_t heads, int64_t kv, int64_t dh, int64_t L, bool bias) {
  return R"({"variant": "llama_attention", "params": {"hidden_size": )" + std::to_string(hidden) +
         R"(, "num_attention_heads": )" + std::to_string(heads) + R"(, "num_key_value_heads": )" +
         std::to_string(kv) + R"(, "head_dim": )" + std::to_string(dh) + R"(, "attention_bias": )" +
         (bias ? "true" : "false") + R"(}, "weights": {"init": "torch", "seed": 1},
         "inputs": {"seed": 2, "x": {"randn": [2, )" + std::to_string(L) + ", " + std::to_string(hidden) + "]}}}";
}

std::string torch_mha(int64_t e, int64_t h, int64_t L, int64_t S, bool causal) {
  return R"({"variant": "torch_mha", "params": {"embed_dim": )" + std::to_string(e) + R"(, "num_heads": )" +
         std::to_string(h) + R"(}, "weights": {"init": "torch", "seed": 7},
    "inputs": {"seed": 3, "query": {"randn": [)" + std::to_string(L) + ", 2, " + std::to_string(e) +
         R"(]}, "key": {"randn": [)" + std::to_string(S) + ", 2, " + std::to_string(e) + R"(]}, "value": {"randn": [)" +
         std::to_string(S) + ", 2, " + std::to_string(e) + "]}}" + (causal ? R"(, "options": {"is_causal": true})" : "") +
         "}";
}

TEST(HeadsShare, CpuMatchesOneProcessBitwise) {
  for (int threads : {1, 2}) {
    check("cpu", llama(64, 8, 2, 8, 32, false), 2, threads);
    check("cpu", llama(96, 12, 12, 8, 40, true), 3, threads);
    check("cpu", llama(128, 8, 4, 16, 70, false), 4, threads);
    check("cpu", torch_mha(48, 4, 33, 33, true), 2, threads);
    check("cpu", torch_mha(64, 8, 17, 29, false), 4, threads);
  }
}

// tt-sim's SDPA pipeline: each share runs up to nlp_concat_heads, and
// project_output runs the output linear over the gathered context in the
// SDPA output's bfloat8_b, as one device does (ttsim_sdpa.h). Padded prefill
// lengths 128 and 256, GQA, bias, 2 to 4 shares.
TEST(HeadsShare, TtSimSdpaMatchesOneProcessBitwise) {
  check("tt-sim", llama(128, 4, 2, 32, 45, true), 2, 1);
  check("tt-sim", llama(192, 6, 3, 32, 130, false), 3, 1);
  check("tt-sim", llama(256, 4, 4, 64, 33, true), 4, 1);
}

// Random shapes (head_configs.h), 1 to 4 shares, 1 and 2 threads for the
// shares and for the one-process pass, in all four pairings.
TEST(HeadsShare, CpuRandomShapesBitwise) {
  std::mt19937 rng(13);
  for (int i = 0; i < 24; ++i) {
    const int64_t parts = 1 + i % 4;
    ordered_json j = ordered_json::parse(test::random_heads_config(rng, 0, parts, "\"cpu\""));
    j.erase("backend");
    check("cpu", j.dump(), parts, 1 + i / 4 % 2, 1 + i / 8 % 2);
  }
}

// Batches of 100 rows cross the 768-row projection groups off a 48-row
// boundary: the output projection of the gathered context must cut its rows
// where one process's flash path does (per group), not in one call.
TEST(HeadsShare, CpuRowGroupsOffAlignment) {
  std::string json = llama(64, 8, 4, 8, 100, true);
  json.replace(json.find("[2, 100"), 7, "[10, 100");
  check("cpu", json, 2, 1);
  check("cpu", json, 4, 2);
}

// One process takes the chunked-query layout (q wider than
// ChunkPolicy::above_floats per batch) and each share of half the width does
// not: the row calls still match, because both layouts project in the same
// batch groups (projection_group_batches).
TEST(HeadsShare, CpuChunkedOnOneSideOnly) {
  const cpu::ChunkPolicy saved = cpu::chunk_policy();
  cpu::chunk_policy() = {100 * 64 + 1, 2 * 96, 1};
  std::string json = llama(64, 8, 2, 8, 100, false);
  json.replace(json.find("[2, 100"), 7, "[3, 100");
  check("cpu", json, 2, 1);
  check("cpu", json, 2, 2);
  // Sequences longer than a chunk, ending off a row block: one process's
  // query chunks stop inside a batch, where the share's whole-batch calls
  // (in kRowBlock rows) must stop too.
  cpu::chunk_policy() = {500 * 32, 2 * 96, 1};
  json = llama(64, 8, 2, 8, 500, false);
  check("cpu", json, 2, 1);
  check("cpu", json, 2, 2);
  cpu::chunk_policy() = saved;
}

// Without the option the cpu backend makes one call over all heads: other
// bits (OpenBLAS rounds by the call's shape), within float32 rounding.
TEST(HeadsShare, CpuUngroupedIsWithinFloat32Rounding) {
  PreparedRun run = prepare_run(parse_config(ordered_json::parse(llama(128, 8, 2, 16, 70, true)), ".", "x"));
  auto backend = make_backend("cpu", ordered_json::object(), "backend");
  RunOptions grouped;
  grouped.group_projections = true;
  const Tensor a = backend->run(run.spec, run.inputs, {}).output, b = backend->run(run.spec, run.inputs, grouped).output;
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.get_f64(i), b.get_f64(i), 2e-6 + 1e-5 * std::abs(b.get_f64(i))) << "element " << i;
}

TEST(HeadsShare, ReferenceMatchesOneProcessBitwise) {
  check("reference", llama(64, 8, 2, 8, 32, false), 2, 1);
  check("reference", torch_mha(48, 6, 9, 13, true), 3, 1);
}

TEST(HeadsShare, UnevenSplitIsOneLine) {
  PreparedRun run = prepare_run(parse_config(ordered_json::parse(llama(64, 8, 2, 8, 4, false)), ".", "x"));
  try {
    parallel::heads_share(run.spec, 0, 4);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "parallel.heads: 8 heads (2 key/value heads) do not split into 4 equal shares");
  }
}

}  // namespace
}  // namespace mha
