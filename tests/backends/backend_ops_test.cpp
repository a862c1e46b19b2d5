// Every backend against the float64 reference backend, one named test per
// (case, backend), in the style of ggml's test-backend-ops:
//   build/tests/test_backends --gtest_filter='AllBackends/BackendOps.Run/torch_mha_kpm__*'
// Each case carries its own tolerances: allclose for cpu, a PCC floor for
// tt-sim (bfloat16 / bfloat8_b arithmetic). Every stage both backends name
// (AttentionResult::stages) is compared, besides the output and weights. A
// spec the backend does not support (Backend::supports) is a skip with the
// reason, never a pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "backends/backend.h"
#include "backends/reference/reference_backend.h"
#include "compare/compare.h"
#include "init/torch_generator.h"
#include "support/test_support.h"
#include "variants/variant.h"

using namespace mha;

namespace {

struct Case {
  const char* name;  // the test name's first part
  const char* variant;
  const char* params;
  const char* options;
  std::vector<std::pair<std::string, Shape>> inputs;  // drawn with torch.rand
  double cpu_atol, cpu_rtol;  // allclose, relative to each stage's largest magnitude
  double tt_pcc;              // tt-sim: PCC floor for the output and every stage but weights
  // tt-sim's floor for the attention weights (0: tt_pcc). Unmasked softmax
  // rows over a few dozen keys are nearly uniform (1/S plus a small spread),
  // so bfloat16's rounding is a large share of their spread and their PCC
  // sits lower while every other stage stays above 0.999.
  double tt_weights_pcc = 0;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"causal_attention", "causal_attention", R"({"d_in": 5, "d_out": 3, "context_length": 9, "dropout": 0.0})", "{}",
       {{"x", {2, 7, 5}}}, 2e-5, 2e-5, 0.999},
      {"causal_attention_bias_40", "causal_attention",
       R"({"d_in": 4, "d_out": 4, "context_length": 40, "dropout": 0.0, "qkv_bias": true})", "{}", {{"x", {1, 40, 4}}},
       2e-5, 2e-5, 0.999},
      {"mha_wrapper", "mha_wrapper",
       R"({"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 3})", "{}", {{"x", {2, 6, 3}}},
       2e-5, 2e-5, 0.999},
      {"mha_causal_bias_33", "mha_causal",
       R"({"d_in": 6, "d_out": 8, "context_length": 33, "dropout": 0.0, "num_heads": 2, "qkv_bias": true})", "{}",
       {{"x", {3, 33, 6}}}, 2e-5, 2e-5, 0.999},
      {"mha_causal_130", "mha_causal",
       R"({"d_in": 64, "d_out": 128, "context_length": 200, "dropout": 0.0, "num_heads": 4})", "{}",
       {{"x", {1, 130, 64}}}, 2e-5, 2e-5, 0.999},
      {"mha_causal_dropout_training", "mha_causal",
       R"({"d_in": 6, "d_out": 8, "context_length": 12, "dropout": 0.5, "num_heads": 2})", R"({"training": true})",
       {{"x", {2, 12, 6}}}, 2e-5, 2e-5, 0.999},
      {"aiedge_mha", "mha", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}, 2e-5, 2e-5, 0.999, 0.97},
      {"aiedge_mha_weights_70", "mha", R"({"d_model": 96, "n_head": 6})", R"({"need_weights": true})",
       {{"x", {2, 70, 96}}}, 2e-5, 2e-5, 0.999, 0.95},
      {"aiedge_fused_qkv", "mha_fused_qkv", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}, 2e-5, 2e-5,
       0.999, 0.97},
      {"aiedge_fused_qkv_65", "mha_fused_qkv", R"({"d_model": 64, "n_head": 8})", "{}", {{"x", {1, 65, 64}}}, 2e-5,
       2e-5, 0.999, 0.935},
      {"ttnn_mha_mask", "ttnn_mha", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {2, 32, 64}}, {"attention_mask", {2, 1, 1, 32}}}, 2e-5, 2e-5, 0.999, 0.995},
      {"ttnn_mha_mask_all_batches", "ttnn_mha", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {3, 64, 64}}, {"attention_mask", {1, 1, 1, 64}}}, 2e-5, 2e-5, 0.999, 0.99},
      {"ttnn_mha_fused", "ttnn_mha_fused", R"({"hidden_size": 64, "num_heads": 4})", "{}", {{"x", {2, 40, 64}}},
       2e-5, 2e-5, 0.998, 0.965},
      {"ttnn_mha_fused_mask", "ttnn_mha_fused", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {2, 40, 64}}, {"attention_mask", {1, 1, 1, 40}}}, 2e-5, 2e-5, 0.998, 0.99},
      {"torch_mha_cross", "torch_mha", R"({"embed_dim": 16, "num_heads": 4, "batch_first": true})", "{}",
       {{"query", {2, 9, 16}}, {"key", {2, 11, 16}}, {"value", {2, 11, 16}}}, 2e-5, 2e-5, 0.999, 0.98},
      {"torch_mha_kpm", "torch_mha", R"({"embed_dim": 16, "num_heads": 4, "batch_first": true})", "{}",
       {{"query", {2, 9, 16}}, {"key", {2, 11, 16}}, {"value", {2, 11, 16}}, {"key_padding_mask", {2, 11}}}, 2e-5,
       2e-5, 0.999, 0.995},
      {"torch_mha_kdim_bias_kv_zero_attn", "torch_mha",
       R"({"embed_dim": 16, "num_heads": 2, "kdim": 5, "vdim": 7, "add_bias_kv": true, "add_zero_attn": true})",
       R"({"average_attn_weights": false})", {{"query", {6, 3, 16}}, {"key", {4, 3, 5}}, {"value", {4, 3, 7}}}, 2e-5,
       2e-5, 0.999, 0.975},
      {"torch_mha_causal_100", "torch_mha", R"({"embed_dim": 32, "num_heads": 4, "batch_first": true})",
       R"({"is_causal": true, "need_weights": false})",
       {{"query", {1, 100, 32}}, {"key", {1, 100, 32}}, {"value", {1, 100, 32}}}, 2e-5, 2e-5, 0.999},
      // RoPE, grouped kv heads and a window across the cpu backend's query blocks (tt-sim: skips; its
      // SDPA path, the one with RoPE, has no window and returns no weights).
      // mha_causal_130 runs on tt-sim's SDPA path (whole-tile heads), the others on its op pipelines.
      {"llama_gqa_window_130", "llama_attention",
       R"({"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 40})",
       "{}", {{"x", {2, 130, 64}}}, 2e-5, 2e-5, 0.999},
      {"llama_mqa_bias_weights", "llama_attention",
       R"({"hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "attention_bias": true,
           "rope_theta": 500000.0})",
       R"({"need_weights": true})", {{"x", {1, 33, 48}}}, 2e-5, 2e-5, 0.999},
  };
  return c;
}

struct Tol {
  double atol = 0, rtol = 0;
  double pcc = 0;  // > 0: compare by PCC instead
};

// `got` against the reference's `want`: where the reference masks (-inf),
// `got` must mask too (-inf, or tt-sim's -1e9 causal fill); the rest by
// PCC, or allclose with atol scaled by the largest reference magnitude (raw
// scores grow with the head size).
::testing::AssertionResult matches(const std::string& what, const Tensor& got, const Tensor& want, const Tol& tol) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << what << ": shape " << shape_str(got.shape()) << ", reference "
                                         << shape_str(want.shape());
  std::vector<float> g, w;
  double peak = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double r = want.get_f64(i), o = got.get_f64(i);
    if (std::isinf(r) && r < 0) {
      if (!(o <= -1e8))
        return ::testing::AssertionFailure() << what << ": element " << i << " is " << o << ", reference masks it";
      continue;
    }
    g.push_back(static_cast<float>(o));
    w.push_back(static_cast<float>(r));
    peak = std::max(peak, std::fabs(r));
  }
  const Shape n{static_cast<int64_t>(g.size())};
  const Tensor gt = Tensor::from_f32(n, g), wt = Tensor::from_f32(n, w);
  if (tol.pcc > 0) {
    const double pcc = compare::compare(wt, gt, compare::Options{}).pcc;
    std::printf("  %-14s pcc %.6f (floor %.4f)\n", what.c_str(), pcc, tol.pcc);
    if (pcc >= tol.pcc) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": pcc " << pcc << " below " << tol.pcc;
  }
  return test::tensors_close(gt, wt, tol.atol * std::max(1.0, peak), tol.rtol);
}

using Param = std::tuple<int, std::string>;  // case index, backend name

// Weights and inputs seeded by the case's name (FNV-1a), so adding a case
// changes no other case's data.
uint64_t name_seed(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h % 100000;
}

}  // namespace

class BackendOps : public ::testing::TestWithParam<Param> {};

TEST_P(BackendOps, Run) {
  const Case& c = cases()[std::get<0>(GetParam())];
  const std::string backend_name = std::get<1>(GetParam());
  SCOPED_TRACE(std::string(c.variant) + " " + c.params + " " + c.options);
  std::unique_ptr<Backend> backend;
  try {
    backend = make_backend(backend_name, ordered_json::object(), "backend");
  } catch (const std::exception& e) {
    GTEST_SKIP() << backend_name << " unavailable: " << e.what();
  }
  auto v = make_variant(c.variant, ordered_json::parse(c.params));
  ForwardOptions opt = v->parse_options(ordered_json::parse(c.options));
  const uint64_t seed = name_seed(c.name);
  TensorMap w = bind_weights(*v, v->init_torch(seed), "init");
  AttentionSpec spec = v->build_spec(w, opt);
  TorchGenerator gen(1000 + seed);
  TensorMap inputs;
  for (const auto& [name, shape] : c.inputs) inputs[name] = gen.rand(shape);
  AttentionInputs in = v->build_inputs(inputs, opt);
  in.dropout_seed = 7;
  if (auto why = backend->supports(spec, in)) GTEST_SKIP() << backend_name << " does not support " << c.name << ": " << *why;
  // tt-sim runs a rotary spec only through its SDPA path, which returns no
  // attention weights (tests/ttsim/sdpa_pipeline_test.cpp covers the path).
  if (backend_name == "tt-sim" && spec.rope && opt.need_weights)
    GTEST_SKIP() << "tt-sim's SDPA path returns no attention weights (" << c.name << ")";

  const bool tt = backend_name == "tt-sim";
  const Tol tol = tt ? Tol{0, 0, c.tt_pcc} : Tol{c.cpu_atol, c.cpu_rtol, 0};
  const Tol weights_tol = tt ? Tol{0, 0, c.tt_weights_pcc > 0 ? c.tt_weights_pcc : c.tt_pcc} : tol;
  auto reference = make_reference_backend();
  // The run a user gets (the cpu backend's flash path unless weights are
  // asked for), then one with every stage (its plain path).
  RunOptions ro;
  ro.need_weights = opt.need_weights;
  AttentionResult want = v->finish(reference->run(spec, in, ro), opt, in);
  AttentionResult got = v->finish(backend->run(spec, in, ro), opt, in);
  EXPECT_TRUE(matches("output", got.output, want.output, tol));
  ASSERT_EQ(got.weights.has_value(), want.weights.has_value());
  if (want.weights) {
    EXPECT_TRUE(matches("weights", *got.weights, *want.weights, weights_tol));
  }
  // A second run reuses the plan and must give identical results.
  AttentionResult again = v->finish(backend->run(spec, in, ro), opt, in);
  EXPECT_TRUE(test::tensors_close(again.output, got.output, 0.0, 0.0));

  RunOptions so;
  so.collect_stages = true;
  const AttentionResult want_st = reference->run(spec, in, so), got_st = backend->run(spec, in, so);
  int compared = 0;
  for (const auto& [name, t] : got_st.stages)
    for (const auto& [ref_name, ref] : want_st.stages)
      if (name == ref_name) {
        EXPECT_TRUE(matches(name, t, ref, name == "weights" ? weights_tol : tol));
        ++compared;
      }
  // q, k, v, scores, masked_scores, weights, context, output; tt-sim's SDPA
  // path (fused scores and softmax) has q, k, v, context, output.
  const bool sdpa = tt && backend->describe().value("pipeline", "") == "sdpa";
  EXPECT_GE(compared, sdpa ? 5 : 8) << "stages compared";
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOps,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(cases().size())),
                                            ::testing::Values(std::string("cpu"), std::string("tt-sim"))),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string n = std::string(cases()[std::get<0>(info.param)].name) + "__" +
                                           std::get<1>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });
