// One generic test drives every variant through every backend and checks it
// against the float64 reference backend (as ggml's test-backend-ops does).
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "backends/reference/reference_backend.h"
#include "init/torch_generator.h"
#include "support/test_support.h"
#include "variants/variant.h"

using namespace mha;

namespace {

struct Case {
  const char* variant;
  const char* params;
  const char* options;
  // inputs: name -> shape (drawn with torch.rand semantics)
  std::vector<std::pair<std::string, Shape>> inputs;
};

std::vector<Case> cases() {
  return {
      {"causal_attention", R"({"d_in": 5, "d_out": 3, "context_length": 9, "dropout": 0.0})", "{}", {{"x", {2, 7, 5}}}},
      {"causal_attention", R"({"d_in": 4, "d_out": 4, "context_length": 40, "dropout": 0.0, "qkv_bias": true})", "{}",
       {{"x", {1, 40, 4}}}},
      {"mha_wrapper", R"({"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 3})", "{}",
       {{"x", {2, 6, 3}}}},
      {"mha_causal", R"({"d_in": 6, "d_out": 8, "context_length": 33, "dropout": 0.0, "num_heads": 2, "qkv_bias": true})",
       "{}", {{"x", {3, 33, 6}}}},
      {"mha_causal", R"({"d_in": 64, "d_out": 128, "context_length": 200, "dropout": 0.0, "num_heads": 4})", "{}",
       {{"x", {1, 130, 64}}}},
      {"mha", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}},
      {"mha", R"({"d_model": 96, "n_head": 6})", R"({"need_weights": true})", {{"x", {2, 70, 96}}}},
      {"mha_fused_qkv", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}},
      {"mha_fused_qkv", R"({"d_model": 64, "n_head": 8})", "{}", {{"x", {1, 65, 64}}}},
      {"ttnn_mha", R"({"hidden_size": 64, "num_heads": 4})", "{}", {{"x", {2, 32, 64}}, {"attention_mask", {2, 1, 1, 32}}}},
      {"ttnn_mha_fused", R"({"hidden_size": 64, "num_heads": 4})", "{}", {{"x", {2, 40, 64}}}},
      {"torch_mha", R"({"embed_dim": 16, "num_heads": 4, "batch_first": true})", "{}",
       {{"query", {2, 9, 16}}, {"key", {2, 11, 16}}, {"value", {2, 11, 16}}}},
      {"torch_mha", R"({"embed_dim": 16, "num_heads": 2, "kdim": 5, "vdim": 7, "add_bias_kv": true, "add_zero_attn": true})",
       R"({"average_attn_weights": false})", {{"query", {6, 3, 16}}, {"key", {4, 3, 5}}, {"value", {4, 3, 7}}}},
      {"torch_mha", R"({"embed_dim": 32, "num_heads": 4, "batch_first": true})", R"({"is_causal": true, "need_weights": false})",
       {{"query", {1, 100, 32}}, {"key", {1, 100, 32}}, {"value", {1, 100, 32}}}},
  };
}

struct Tol {
  double atol, rtol;
};

// cpu: torch.testing's float32 tolerances, scaled up a little for the
// longer reductions of these shapes; tt-sim: bfloat16 arithmetic.
Tol tolerance_for(const std::string& backend) {
  if (backend == "cpu") return {2e-5, 2e-5};
  return {5e-2, 5e-2};
}

}  // namespace

class AllVariantsAllBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(AllVariantsAllBackends, MatchesReference) {
  const std::string backend_name = GetParam();
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(backend_name, ordered_json::object(), "backend");
  } catch (const std::exception& e) {
    GTEST_SKIP() << backend_name << " unavailable: " << e.what();
  }
  auto reference = make_reference_backend();
  int seed = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(c.variant) + " " + c.params + " " + c.options);
    auto v = make_variant(c.variant, ordered_json::parse(c.params));
    ForwardOptions opt = v->parse_options(ordered_json::parse(c.options));
    TensorMap w = bind_weights(*v, v->init_torch(++seed), "init");
    AttentionSpec spec = v->build_spec(w, opt);
    TorchGenerator gen(1000 + seed);
    TensorMap inputs;
    for (const auto& [name, shape] : c.inputs) inputs[name] = gen.rand(shape);
    AttentionInputs in = v->build_inputs(inputs, opt);
    RunOptions ro;
    ro.need_weights = opt.need_weights;
    AttentionResult want = v->finish(reference->run(spec, in, ro), opt);
    AttentionResult got = v->finish(backend->run(spec, in, ro), opt);
    Tol tol = tolerance_for(backend_name);
    EXPECT_TRUE(test::tensors_close(got.output, want.output, tol.atol, tol.rtol));
    ASSERT_EQ(got.weights.has_value(), want.weights.has_value());
    if (want.weights) {
      EXPECT_TRUE(test::tensors_close(*got.weights, *want.weights, tol.atol, tol.rtol));
    }
    // A second run hits the plan cache and must give identical results.
    AttentionResult again = v->finish(backend->run(spec, in, ro), opt);
    EXPECT_TRUE(test::tensors_close(again.output, got.output, 0.0, 0.0));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AllVariantsAllBackends, ::testing::Values("reference", "cpu", "tt-sim"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });
