// The AttentionSpec features of today's Hugging Face decoders against
// scripts/hf_attention_oracle.py, an independent restatement of
// transformers' modeling code, on fresh shapes and seeds every run:
//   Qwen3     per-head RMSNorm of q and k before the rope
//   Gemma 2   logit softcapping, query_pre_attn_scalar, sliding window
//   Gemma 3   QK RMSNorm with (1 + w), sliding window
//   gpt-oss   attention sinks, biases, yarn with truncate false
//   Phi-3     partial rotary
//   Llama 3.1 llama3 scaling; linear and yarn (truncated) scalings;
//             DeepSeek's interleaved pairs
// Specs are built here field by field (the variants that build them from
// a Hugging Face folder are tested with them). The reference backend must
// be within float64 rounding of the float64 module (rtol 1e-9, atol 1e-12,
// as tests/parity/parity.h), the cpu backend within torch.testing's float32
// tolerances (atol 1e-5, rtol 1.3e-6) of the float32 module, both modules
// with mha's correctly rounded rope table (scripts/hf_attention_oracle.py
// says why). MHA_PARITY_SEED=N replays a run.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "io/tensor_file.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

enum class Family { Qwen3, Gemma2, Gemma3, GptOss, Phi3, Llama3, Linear, YarnDeepSeek };
const char* family_name(Family f) {
  const char* names[] = {"qwen3", "gemma2", "gemma3", "gpt-oss", "phi3", "llama3", "linear", "yarn-interleaved"};
  return names[static_cast<int>(f)];
}

// One drawn layer: the spec, its input, and what the oracle reads.
struct Layer {
  AttentionSpec spec;
  AttentionInputs in;
  json oracle;       // case.json
  NamedTensors npy;  // written as NAME.npy
};

Tensor normal(std::mt19937& g, Shape shape, float sd) {
  std::normal_distribution<float> n(0.0f, sd);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> v(count);
  for (float& x : v) x = n(g);
  return Tensor::from_f32(shape, std::move(v));
}

void add_projection(Layer& l, const char* name, std::mt19937& g, int64_t out, int64_t in, bool bias, Projection& p) {
  p = rand_proj(g, out, in, bias);
  l.npy.emplace_back(std::string("w") + name, p.weight);
  if (bias) l.npy.emplace_back(std::string("b") + name, *p.bias);
}

// The rope of a family: theta, rotary width, scaling, as its config has it.
void add_rope(Layer& l, Family f, Rng& r, int64_t dh) {
  RotaryEmbedding rope;
  rope.theta = r.pick(std::vector<double>{10000.0, 150000.0, 500000.0, 1000000.0});
  json j = {{"rope_theta", rope.theta}, {"rope_type", "default"}, {"interleaved", false}};
  if (f == Family::Phi3) rope.rotary_dim = r.pick(std::vector<int64_t>{dh / 2, dh / 4, dh - 2});  // partial_rotary_factor
  if (f == Family::Llama3) {
    rope.scaling = RopeScaling::Llama3, rope.factor = r.pick(std::vector<double>{8.0, 32.0});
    rope.low_freq_factor = 1.0, rope.high_freq_factor = 4.0;
    rope.original_max_positions = r.pick(std::vector<int64_t>{64, 8192});
    j.update({{"rope_type", "llama3"}, {"factor", rope.factor}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
              {"original_max_position_embeddings", rope.original_max_positions}});
  }
  if (f == Family::Linear) {
    rope.scaling = RopeScaling::Linear, rope.factor = r.pick(std::vector<double>{2.0, 4.0, 0.5});
    j.update({{"rope_type", "linear"}, {"factor", rope.factor}});
  }
  if (f == Family::GptOss || f == Family::YarnDeepSeek) {
    rope.scaling = RopeScaling::Yarn, rope.factor = r.pick(std::vector<double>{4.0, 32.0, 40.0});
    rope.original_max_positions = r.pick(std::vector<int64_t>{4096, 64});
    rope.truncate = f != Family::GptOss;
    rope.beta_fast = 32.0, rope.beta_slow = 1.0;
    rope.attention_factor = 0.1 * std::log(rope.factor) + 1.0;  // what a config without attention_factor means
    rope.interleaved = f == Family::YarnDeepSeek;
    j.update({{"rope_type", "yarn"}, {"factor", rope.factor}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
              {"original_max_position_embeddings", rope.original_max_positions}, {"truncate", rope.truncate},
              {"interleaved", rope.interleaved}});
  }
  j["rotary_dim"] = rope.rotary_dim > 0 ? rope.rotary_dim : dh;
  l.spec.rope = rope;
  l.oracle["rope"] = j;
}

Layer draw_layer(Family f, Rng& r) {
  Layer l;
  std::mt19937 g(static_cast<uint32_t>(r.draw_seed()));
  const int64_t Hkv = r.uniform(1, 2), H = Hkv * r.pick(std::vector<int64_t>{1, 2, 4});
  const int64_t dh = r.pick(std::vector<int64_t>{16, 32, 64}), E = r.uniform(16, 80);
  const int64_t B = r.uniform(1, 2), L = r.coin(0.25) ? r.uniform(97, 130) : r.uniform(1, 40);
  const bool bias = f == Family::GptOss || r.coin(0.25);
  AttentionSpec& s = l.spec;
  s.variant = family_name(f);
  s.num_heads = H, s.num_kv_heads = Hkv, s.head_dim = dh, s.head_dim_v = dh, s.causal = true;
  add_projection(l, "q", g, H * dh, E, bias, s.q);
  add_projection(l, "k", g, Hkv * dh, E, bias, s.k);
  add_projection(l, "v", g, Hkv * dh, E, bias, s.v);
  s.out.emplace();
  add_projection(l, "o", g, E, H * dh, bias, *s.out);
  l.oracle = {{"num_heads", H}, {"num_kv_heads", Hkv}, {"head_dim", dh}};
  double scale_dim = static_cast<double>(dh);
  if (f == Family::Gemma2) {
    s.softcap = r.pick(std::vector<double>{50.0, 2.0, 0.5});  // small caps make tanh bend
    scale_dim = static_cast<double>(r.pick(std::vector<int64_t>{dh, 256, 24}));
    l.oracle.update({{"attn_logit_softcapping", s.softcap}, {"query_pre_attn_scalar", scale_dim}});
  }
  s.scale = 1.0 / std::sqrt(scale_dim);
  if ((f == Family::Gemma2 || f == Family::Gemma3 || f == Family::GptOss) && r.coin() && L > 1) {
    s.window = r.uniform(1, L - 1);
    l.oracle["sliding_window"] = s.window;
  }
  if (f == Family::Qwen3 || f == Family::Gemma3) {
    const bool gemma = f == Family::Gemma3;
    QkNorm n{normal(g, {dh}, gemma ? 0.3f : 1.0f), normal(g, {dh}, gemma ? 0.3f : 1.0f), gemma ? 1e-6 : 1e-5, gemma};
    if (!gemma) n.q_weight = rand_tensor(g, {dh}, 0.5f, 1.5f), n.k_weight = rand_tensor(g, {dh}, 0.5f, 1.5f);
    l.npy.emplace_back("q_norm", n.q_weight);
    l.npy.emplace_back("k_norm", n.k_weight);
    l.oracle["qk_norm"] = {{"eps", n.eps}, {"offset_one", n.offset_one}};
    s.qk_norm = n;
  }
  if (f == Family::GptOss) {
    s.sinks = normal(g, {H}, 2.0f);
    l.npy.emplace_back("sinks", *s.sinks);
  }
  if (f != Family::Gemma2 || r.coin()) add_rope(l, f, r, dh);
  const Tensor x = normal(g, {B, L, E}, 1.0f);
  l.in.query = l.in.key = l.in.value = x;
  l.npy.emplace_back("x", x);
  if (l.spec.rope && r.coin(0.3)) {
    // Positions past the original context exercise the scalings' bands.
    Tensor pos(DType::I64, {1, L});
    int64_t p = r.uniform(0, 20000);
    for (int64_t i = 0; i < L; ++i) pos.data<int64_t>()[i] = (p += r.uniform(0, 3));
    l.in.positions = pos;
    l.npy.emplace_back("pos", *l.in.positions);
  }
  json names = json::array();
  for (const auto& [name, t] : l.npy) names.push_back(name);
  l.oracle["tensors"] = names;
  return l;
}

// The reference gets float64 weights and inputs, as the runner gives it.
AttentionSpec as_f64(const AttentionSpec& s) {
  AttentionSpec r = s;
  r.uid = new_spec_uid();
  for (Projection* p : {&r.q, &r.k, &r.v, &*r.out}) {
    p->weight = p->weight.cast(DType::F64);
    if (p->bias) p->bias = p->bias->cast(DType::F64);
  }
  if (r.qk_norm) {
    r.qk_norm->q_weight = r.qk_norm->q_weight.cast(DType::F64);
    r.qk_norm->k_weight = r.qk_norm->k_weight.cast(DType::F64);
  }
  if (r.sinks) r.sinks = r.sinks->cast(DType::F64);
  return r;
}

void check_family(Family f, int cases) {
  Rng r;
  SCOPED_TRACE(r.trace());
  TempDir dir;
  std::vector<Layer> layers;
  std::string folders;
  for (int i = 0; i < cases; ++i) {
    layers.push_back(draw_layer(f, r));
    const std::string d = dir.file(std::to_string(i));
    ASSERT_EQ(run_command("mkdir " + shell_quote(d)).exit_code, 0);
    for (const auto& [name, t] : layers.back().npy) io::write_npy(d + "/" + name + ".npy", t);
    write_text(d + "/case.json", layers.back().oracle.dump());
    folders += ", " + json(d).dump();
  }
  const CommandResult py = run_python("import runpy, sys\nsys.argv = [''" + folders +
                                      "]\nrunpy.run_path('scripts/hf_attention_oracle.py', run_name='__main__')\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend({{"threads", 2}}, "backend");
  for (int i = 0; i < cases; ++i) {
    const Layer& l = layers[i];
    SCOPED_TRACE(std::string(family_name(f)) + " case " + std::to_string(i) + ": " + l.oracle.dump());
    const std::string d = dir.file(std::to_string(i));
    const Tensor want64 = io::read_npy(d + "/out64.npy"), want32 = io::read_npy(d + "/out32.npy");
    AttentionInputs in64 = l.in;
    in64.query = in64.key = in64.value = l.in.query.cast(DType::F64);
    EXPECT_TRUE(tensors_close(ref->run(as_f64(l.spec), in64, {}).output, want64, 1e-12, 1e-9)) << "reference";
    EXPECT_TRUE(tensors_close(cpu->run(l.spec, l.in, {}).output, want32, 1e-5, 1.3e-6)) << "cpu (flash path)";
    RunOptions weights;
    weights.need_weights = true;
    EXPECT_TRUE(tensors_close(cpu->run(l.spec, l.in, weights).output, want32, 1e-5, 1.3e-6)) << "cpu (plain path)";
  }
}

TEST(HfFeaturesParity, Qwen3QkNorm) { check_family(Family::Qwen3, 4); }
TEST(HfFeaturesParity, Gemma2SoftcapAndQueryPreAttnScalar) { check_family(Family::Gemma2, 4); }
TEST(HfFeaturesParity, Gemma3OffsetOneQkNorm) { check_family(Family::Gemma3, 4); }
TEST(HfFeaturesParity, GptOssSinksAndYarn) { check_family(Family::GptOss, 4); }
TEST(HfFeaturesParity, Phi3PartialRotary) { check_family(Family::Phi3, 4); }
TEST(HfFeaturesParity, Llama3RopeScaling) { check_family(Family::Llama3, 4); }
TEST(HfFeaturesParity, LinearRopeScaling) { check_family(Family::Linear, 3); }
TEST(HfFeaturesParity, YarnInterleavedRope) { check_family(Family::YarnDeepSeek, 3); }

}  // namespace
}  // namespace mha::test
