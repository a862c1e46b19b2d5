// Every registered backend against the float64 reference backend, one named
// test per (case, backend), in the style of ggml's test-backend-ops:
//   build/tests/test_backends --gtest_filter='AllBackends/BackendOps.Run/torch_mha_kpm__*'
// The backends come from the registry (backends/registry.h) when the tests
// are listed, so a backend registered in the test tree (register_backend
// from a static initialiser in any tests/backends/ file) is tested here
// without naming it. Each case carries its own error bound, and the bound a
// backend is held to is derived from its declared precision
// (Backend::precision), never from its name: elementwise within `growth`
// unit roundoffs of the reference (relative to each stage's largest
// magnitude), or, for a backend that rounds to a device's formats at every
// step, a PCC floor that the case states for bfloat16 and that scales with
// the square of the unit roundoff. Every stage both backends name
// (AttentionResult::stages) is compared, besides the output and weights.
// Prefill and KV-cache decode (a prompt, then single-token steps, against
// one causal run of the same tokens). A spec or capability the backend does
// not support is a skip with the backend's reason, never a pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "backends/backend.h"
#include "backends/registry.h"
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
  // Elementwise backends: atol and rtol of `growth` unit roundoffs, atol
  // relative to each stage's largest magnitude (336 u = 2e-5 in float32).
  double growth;
  // Statistical backends: the PCC floor for the output and every stage but
  // the weights, at bfloat16's unit roundoff.
  double pcc_bf16;
  // The floor for the attention weights (0: pcc_bf16). Unmasked softmax rows
  // over a few dozen keys are nearly uniform (1/S plus a small spread), so
  // bfloat16's rounding is a large share of their spread and their PCC sits
  // lower while every other stage stays above 0.999.
  double weights_pcc_bf16 = 0;
};

constexpr double kGrowth = 336;

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"causal_attention", "causal_attention", R"({"d_in": 5, "d_out": 3, "context_length": 9, "dropout": 0.0})", "{}",
       {{"x", {2, 7, 5}}}, kGrowth, 0.999},
      {"causal_attention_bias_40", "causal_attention",
       R"({"d_in": 4, "d_out": 4, "context_length": 40, "dropout": 0.0, "qkv_bias": true})", "{}", {{"x", {1, 40, 4}}},
       kGrowth, 0.999},
      {"mha_wrapper", "mha_wrapper",
       R"({"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 3})", "{}", {{"x", {2, 6, 3}}},
       kGrowth, 0.999},
      {"mha_causal_bias_33", "mha_causal",
       R"({"d_in": 6, "d_out": 8, "context_length": 33, "dropout": 0.0, "num_heads": 2, "qkv_bias": true})", "{}",
       {{"x", {3, 33, 6}}}, kGrowth, 0.999},
      {"mha_causal_130", "mha_causal",
       R"({"d_in": 64, "d_out": 128, "context_length": 200, "dropout": 0.0, "num_heads": 4})", "{}",
       {{"x", {1, 130, 64}}}, kGrowth, 0.999},
      {"mha_causal_dropout_training", "mha_causal",
       R"({"d_in": 6, "d_out": 8, "context_length": 12, "dropout": 0.5, "num_heads": 2})", R"({"training": true})",
       {{"x", {2, 12, 6}}}, kGrowth, 0.999},
      {"aiedge_mha", "mha", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}, kGrowth, 0.999, 0.97},
      {"aiedge_mha_weights_70", "mha", R"({"d_model": 96, "n_head": 6})", R"({"need_weights": true})",
       {{"x", {2, 70, 96}}}, kGrowth, 0.999, 0.95},
      {"aiedge_fused_qkv", "mha_fused_qkv", R"({"d_model": 12, "n_head": 3})", "{}", {{"x", {2, 5, 12}}}, kGrowth,
       0.999, 0.97},
      {"aiedge_fused_qkv_65", "mha_fused_qkv", R"({"d_model": 64, "n_head": 8})", "{}", {{"x", {1, 65, 64}}}, kGrowth,
       0.999, 0.935},
      {"ttnn_mha_mask", "ttnn_mha", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {2, 32, 64}}, {"attention_mask", {2, 1, 1, 32}}}, kGrowth, 0.999, 0.995},
      {"ttnn_mha_mask_all_batches", "ttnn_mha", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {3, 64, 64}}, {"attention_mask", {1, 1, 1, 64}}}, kGrowth, 0.999, 0.99},
      {"ttnn_mha_fused", "ttnn_mha_fused", R"({"hidden_size": 64, "num_heads": 4})", "{}", {{"x", {2, 40, 64}}},
       kGrowth, 0.998, 0.965},
      {"ttnn_mha_fused_mask", "ttnn_mha_fused", R"({"hidden_size": 64, "num_heads": 4})", "{}",
       {{"x", {2, 40, 64}}, {"attention_mask", {1, 1, 1, 40}}}, kGrowth, 0.998, 0.99},
      {"torch_mha_cross", "torch_mha", R"({"embed_dim": 16, "num_heads": 4, "batch_first": true})", "{}",
       {{"query", {2, 9, 16}}, {"key", {2, 11, 16}}, {"value", {2, 11, 16}}}, kGrowth, 0.999, 0.98},
      {"torch_mha_kpm", "torch_mha", R"({"embed_dim": 16, "num_heads": 4, "batch_first": true})", "{}",
       {{"query", {2, 9, 16}}, {"key", {2, 11, 16}}, {"value", {2, 11, 16}}, {"key_padding_mask", {2, 11}}}, kGrowth,
       0.999, 0.995},
      {"torch_mha_kdim_bias_kv_zero_attn", "torch_mha",
       R"({"embed_dim": 16, "num_heads": 2, "kdim": 5, "vdim": 7, "add_bias_kv": true, "add_zero_attn": true})",
       R"({"average_attn_weights": false})", {{"query", {6, 3, 16}}, {"key", {4, 3, 5}}, {"value", {4, 3, 7}}}, kGrowth,
       0.999, 0.975},
      {"torch_mha_causal_100", "torch_mha", R"({"embed_dim": 32, "num_heads": 4, "batch_first": true})",
       R"({"is_causal": true, "need_weights": false})",
       {{"query", {1, 100, 32}}, {"key", {1, 100, 32}}, {"value", {1, 100, 32}}}, kGrowth, 0.999},
      // RoPE, grouped kv heads and a window across the cpu backend's query blocks (tt-sim: skips; its
      // SDPA path, the one with RoPE, has no window and returns no weights).
      // mha_causal_130 runs on tt-sim's SDPA path (whole-tile heads), the others on its op pipelines.
      {"llama_gqa_window_130", "llama_attention",
       R"({"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 40})",
       "{}", {{"x", {2, 130, 64}}}, kGrowth, 0.999},
      {"llama_mqa_bias_weights", "llama_attention",
       R"({"hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "attention_bias": true,
           "rope_theta": 500000.0})",
       R"({"need_weights": true})", {{"x", {1, 33, 48}}}, kGrowth, 0.999},
  };
  return c;
}

struct Tol {
  double atol = 0, rtol = 0;
  double pcc = 0;  // > 0: compare by PCC instead
};

// The bound a backend of precision `p` is held to on a case stated as
// `growth` roundoffs (elementwise) or a PCC floor at bfloat16 (statistical).
Tol bound(const Precision& p, double growth, double pcc_bf16) {
  if (!p.statistical) return {growth * p.unit_roundoff, growth * p.unit_roundoff, 0};
  const double r = p.unit_roundoff / 0x1p-8;
  return {0, 0, 1.0 - (1.0 - pcc_bf16) * r * r};
}

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

// Every backend in the registry when the tests are listed (after every
// static initialiser, so test-tree registrations are included).
std::vector<std::string> registered_backends() {
  std::vector<std::string> names;
  for (const BackendEntry& e : backend_registry()) names.push_back(e.name);
  return names;
}

std::string param_name(const char* case_name, const std::string& backend) {
  std::string n = std::string(case_name) + "__" + backend;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// The backend `name` with its default options (plus `options` for tt-sim); a
// backend this machine cannot make (an option the CPU lacks) is a skip, with
// its reason.
std::unique_ptr<Backend> make_or_skip(const std::string& name, std::string* why,
                                      const ordered_json& ttsim_options = ordered_json::object()) {
  try {
    return make_backend(name, name == "tt-sim" ? ttsim_options : ordered_json::object(), "backend");
  } catch (const std::exception& e) {
    *why = name + " unavailable: " + e.what();
    return nullptr;
  }
}

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
  std::string unavailable;
  std::unique_ptr<Backend> backend = make_or_skip(backend_name, &unavailable);
  if (!backend) GTEST_SKIP() << unavailable;
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
  if (opt.need_weights)
    if (auto why = backend->supports(Capability::AttentionWeights, spec))
      GTEST_SKIP() << backend_name << " gives no attention weights for " << c.name << ": " << *why;

  const Precision prec = backend->precision();
  const Tol tol = bound(prec, c.growth, c.pcc_bf16);
  const Tol weights_tol = bound(prec, c.growth, c.weights_pcc_bf16 > 0 ? c.weights_pcc_bf16 : c.pcc_bf16);
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
  std::vector<std::string> compared;
  for (const auto& [name, t] : got_st.stages)
    for (const auto& [ref_name, ref] : want_st.stages)
      if (name == ref_name) {
        EXPECT_TRUE(matches(name, t, ref, name == "weights" ? weights_tol : tol));
        compared.push_back(name);
      }
  // Every backend names q, k, v, context and output; one that forms the
  // scores (not a fused SDPA) names scores, masked_scores and weights too.
  auto named = [&](const char* n) { return std::find(compared.begin(), compared.end(), n) != compared.end(); };
  for (const char* n : {"q", "k", "v", "context", "output"}) EXPECT_TRUE(named(n)) << "stage " << n << " compared";
  if (named("scores")) {
    EXPECT_TRUE(named("masked_scores"));
    EXPECT_TRUE(named("weights"));
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOps,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(cases().size())),
                                            ::testing::ValuesIn(registered_backends())),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return param_name(cases()[std::get<0>(info.param)].name, std::get<1>(info.param));
                         });

// KV-cache decode: `prompt` tokens in one append, then `steps` single-token
// appends, concatenated, against one causal run of the reference over the
// same tokens (what a decode must equal). The cache holds float32 where the
// backend can (its own format otherwise: tt-sim's bfloat8_b).
struct DecodeCase {
  const char* name;
  const char* params;  // llama_attention
  int64_t batch, prompt, steps;
  double growth, pcc_bf16;
  const char* ttsim_options = "{}";  // what the case needs of tt-sim
};

const std::vector<DecodeCase>& decode_cases() {
  static const std::vector<DecodeCase> c = {
      {"llama_gqa", R"({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32})", 1,
       40, 5, kGrowth, 0.99},
      {"llama_mqa_bias_batch2",
       R"({"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
           "attention_bias": true, "rope_theta": 500000.0})",
       2, 33, 4, kGrowth, 0.99},
      {"mistral_window",
       R"({"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
           "head_dim": 32, "sliding_window": 16})",
       1, 30, 6, kGrowth, 0.99},
  };
  return c;
}

using test::token_rows;

// Appends' outputs [B, n_i, E] joined along the tokens.
Tensor join_tokens(const std::vector<Tensor>& parts) {
  const int64_t B = parts[0].dim(0), E = parts[0].dim(2);
  int64_t L = 0;
  for (const Tensor& t : parts) L += t.dim(1);
  std::vector<float> v(B * L * E);
  int64_t at = 0;
  for (const Tensor& t : parts) {
    const std::vector<float> f = t.to_f32();
    const int64_t n = t.dim(1);
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(v.data() + (b * L + at) * E, f.data() + b * n * E, sizeof(float) * n * E);
    at += n;
  }
  return Tensor::from_f32({B, L, E}, v);
}

using DecodeParam = std::tuple<int, std::string>;  // decode case index, backend name

class BackendDecode : public ::testing::TestWithParam<DecodeParam> {};

TEST_P(BackendDecode, MatchesCausalPrefill) {
  const DecodeCase& c = decode_cases()[std::get<0>(GetParam())];
  const std::string backend_name = std::get<1>(GetParam());
  SCOPED_TRACE(c.params);
  std::string unavailable;
  std::unique_ptr<Backend> backend = make_or_skip(backend_name, &unavailable, ordered_json::parse(c.ttsim_options));
  if (!backend) GTEST_SKIP() << unavailable;
  auto v = make_variant("llama_attention", ordered_json::parse(c.params));
  ForwardOptions opt = v->parse_options(ordered_json::object());
  const uint64_t seed = name_seed(c.name);
  TensorMap w = bind_weights(*v, v->init_torch(seed), "init");
  AttentionSpec spec = v->build_spec(w, opt);
  if (auto why = backend->supports_decode(spec)) GTEST_SKIP() << backend_name << " cannot decode " << c.name << ": " << *why;

  const int64_t L = c.prompt + c.steps;
  TorchGenerator gen(1000 + seed);
  TensorMap inputs;
  inputs["x"] = gen.rand({c.batch, L, spec.q_in()});
  AttentionInputs whole = v->build_inputs(inputs, opt);
  const Tensor want_f64 = make_reference_backend()->run(spec, whole, RunOptions{}).output;
  const Tensor want = Tensor::from_f32(want_f64.shape(), want_f64.to_f32());

  DecodeOptions dopt;
  dopt.batch = c.batch;
  dopt.max_tokens = L;
  auto session = backend->start_decode(spec, dopt);
  std::vector<Tensor> parts{session->append(token_rows(whole.query, 0, c.prompt))};
  for (int64_t t = 0; t < c.steps; ++t) parts.push_back(session->append(token_rows(whole.query, c.prompt + t, 1)));
  EXPECT_EQ(session->length(), L);
  const Tensor got = join_tokens(parts);
  EXPECT_TRUE(matches("decode output", got, want, bound(backend->precision(), c.growth, c.pcc_bf16)));
  // The last steps alone, where the cache (not the prompt's one pass) is read.
  const Tensor got_steps = token_rows(got, c.prompt, c.steps), want_steps = token_rows(want, c.prompt, c.steps);
  EXPECT_TRUE(matches("decode steps", got_steps, want_steps, bound(backend->precision(), c.growth, c.pcc_bf16)));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendDecode,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(decode_cases().size())),
                                            ::testing::ValuesIn(registered_backends())),
                         [](const ::testing::TestParamInfo<DecodeParam>& info) {
                           return param_name(decode_cases()[std::get<0>(info.param)].name, std::get<1>(info.param));
                         });
