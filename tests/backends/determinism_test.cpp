// Results are identical run to run: the cpu backend gives bitwise the same
// output with 1 or 2 threads, cold (plan being built) or cached, and after
// other specs have filled its plan cache.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/backend.h"
#include "config/config.h"
#include "run/runner.h"

namespace mha {
namespace {

PreparedRun prepare(const std::string& json) {
  return prepare_run(parse_config(ordered_json::parse(json), ".", "determinism"));
}

// torch_mha (seq-first) with random inputs: L queries over S keys, E wide.
std::string config(int64_t l, int64_t s, int64_t e, int64_t h, bool causal) {
  auto shape = [](int64_t a, int64_t b, int64_t c) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + "]";
  };
  return R"({"variant": "torch_mha", "params": {"embed_dim": )" + std::to_string(e) + R"(, "num_heads": )" +
         std::to_string(h) + R"(}, "weights": {"init": "torch", "seed": 7},
    "inputs": {"seed": 3, "query": {"randn": )" + shape(l, 2, e) + R"(}, "key": {"randn": )" + shape(s, 2, e) +
         R"(}, "value": {"randn": )" + shape(s, 2, e) + "}}" + (causal ? R"(, "options": {"is_causal": true})" : "") +
         "}";
}

std::unique_ptr<Backend> cpu(int threads) {
  ordered_json o = ordered_json::object();
  o["threads"] = threads;
  return make_backend("cpu", o, "backend");
}

::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return ::testing::AssertionFailure() << "dtype or shape differ";
  if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
    for (int64_t i = 0; i < a.numel(); ++i)
      if (std::memcmp(a.raw() + i * dtype_size(a.dtype()), b.raw() + i * dtype_size(a.dtype()), dtype_size(a.dtype())))
        return ::testing::AssertionFailure() << "first difference at element " << i << ": " << a.get_f64(i) << " vs "
                                             << b.get_f64(i);
  }
  return ::testing::AssertionSuccess();
}

void check_deterministic(const std::string& json, bool need_weights) {
  PreparedRun main = prepare(json);
  PreparedRun other = prepare(config(5, 9, 16, 2, false));
  RunOptions opt;
  opt.need_weights = need_weights;

  auto one = cpu(1);
  AttentionResult cold1 = one->run(main.spec, main.inputs, opt);
  AttentionResult cached1 = one->run(main.spec, main.inputs, opt);

  // Two threads, with another spec's plan already in the cache.
  auto two = cpu(2);
  two->run(other.spec, other.inputs, opt);
  AttentionResult cold2 = two->run(main.spec, main.inputs, opt);
  two->run(other.spec, other.inputs, opt);
  AttentionResult cached2 = two->run(main.spec, main.inputs, opt);
  EXPECT_GE(two->cache_stats().hits, 2);

  // A fresh spec object for the same module: a new plan for the same numbers.
  PreparedRun again = prepare(json);
  AttentionResult rebuilt2 = two->run(again.spec, again.inputs, opt);

  for (const AttentionResult* r : {&cached1, &cold2, &cached2, &rebuilt2}) {
    EXPECT_TRUE(bitwise_equal(cold1.output, r->output));
    if (need_weights) {
      ASSERT_TRUE(r->weights.has_value());
      EXPECT_TRUE(bitwise_equal(*cold1.weights, *r->weights));
    }
  }
}

TEST(Determinism, CpuBackendSameBitsAcrossThreadsAndPlanCacheStates) {
  check_deterministic(config(67, 67, 64, 4, false), false);
}

TEST(Determinism, CausalLongSequenceWithWeights) {
  check_deterministic(config(300, 300, 32, 4, true), true);
  check_deterministic(config(300, 300, 32, 4, true), false);
}

TEST(Determinism, CrossAttentionOddShapes) { check_deterministic(config(33, 129, 24, 3, false), false); }

// Fewer rows than columns (50 queries x 2 batches, 200 wide): the output
// projection is cut by columns, which must not depend on the thread count.
TEST(Determinism, FewerRowsThanColumns) { check_deterministic(config(50, 50, 200, 4, true), false); }

// Long enough for the flash path's chunked projections.
TEST(Determinism, FlashPathLongSequence) { check_deterministic(config(700, 700, 128, 4, false), false); }

}  // namespace
}  // namespace mha
