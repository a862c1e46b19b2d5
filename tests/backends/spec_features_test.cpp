// The AttentionSpec features of today's models (model/attention.h) at the
// edges: bad field values are refused with one line naming the field;
// tt-sim refuses what it does not emulate with the reason and takes rope
// scalings; partial attention (ring runs) refuses softcap and sinks on cpu
// and reference. Their arithmetic is held to transformers' modeling code in
// tests/parity/hf_features_parity_test.cpp and, in decode, in
// tests/backends/decode_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "backends/ttsim/ttsim_backend.h"
#include "model/rope.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

// Causal self-attention SDPA can take: 2 heads of 32, input width 64.
AttentionSpec base_spec(std::mt19937& g) {
  AttentionSpec s;
  s.variant = "features";
  s.num_heads = 2, s.num_kv_heads = 2, s.head_dim = 32, s.head_dim_v = 32;
  s.q = test::rand_proj(g, 64, 64, false);
  s.k = test::rand_proj(g, 64, 64, false);
  s.v = test::rand_proj(g, 64, 64, false);
  s.out = test::rand_proj(g, 64, 64, false);
  s.scale = 1.0 / std::sqrt(32.0);
  s.causal = true;
  s.attention = AttentionKernel::Sdpa;  // tt-sim's path for rotary layers
  s.rope = RotaryEmbedding{10000.0};
  return s;
}

AttentionInputs inputs(std::mt19937& g) {
  AttentionInputs in;
  in.query = in.key = in.value = test::rand_tensor(g, {1, 8, 64}, -1, 1);
  return in;
}

std::string refusal(const AttentionSpec& s, const AttentionInputs& in) {
  try {
    validate_inputs(s, in);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SpecFeatures, BadFieldsAreRefusedNamingThem) {
  std::mt19937 g(1);
  const AttentionInputs in = inputs(g);
  AttentionSpec s = base_spec(g);
  s.rope->rotary_dim = 7;
  EXPECT_NE(refusal(s, in).find("rotary_dim"), std::string::npos) << refusal(s, in);
  s.rope->rotary_dim = 34;
  EXPECT_NE(refusal(s, in).find("rotary_dim"), std::string::npos);
  s = base_spec(g);
  s.rope->scaling = RopeScaling::Yarn, s.rope->factor = 4.0;
  EXPECT_NE(refusal(s, in).find("original_max_positions"), std::string::npos) << refusal(s, in);
  s = base_spec(g);
  s.softcap = -1.0;
  EXPECT_NE(refusal(s, in).find("softcap"), std::string::npos);
  s = base_spec(g);
  s.sinks = test::rand_tensor(g, {3}, -1, 1);
  EXPECT_NE(refusal(s, in).find("sinks"), std::string::npos);
  s = base_spec(g);
  s.qk_norm = QkNorm{test::rand_tensor(g, {32}, -1, 1), test::rand_tensor(g, {16}, -1, 1)};
  EXPECT_NE(refusal(s, in).find("qk_norm k_weight"), std::string::npos) << refusal(s, in);
}

TEST(SpecFeatures, TtSimRefusesWhatItDoesNotEmulateAndTakesRopeScalings) {
  std::mt19937 g(2);
  const AttentionInputs in = inputs(g);
  auto tt = make_ttsim_backend(nlohmann::ordered_json::object(), "backend");
  AttentionSpec yarn = base_spec(g);
  yarn.rope->scaling = RopeScaling::Yarn, yarn.rope->factor = 4.0, yarn.rope->original_max_positions = 16;
  EXPECT_FALSE(tt->supports(yarn, in)) << *tt->supports(yarn, in);
  struct Feature {
    const char* word;
    void (*set)(AttentionSpec&, std::mt19937&);
  };
  const Feature features[] = {
      {"softcap", [](AttentionSpec& s, std::mt19937&) { s.softcap = 30.0; }},
      {"partial rotary", [](AttentionSpec& s, std::mt19937&) { s.rope->rotary_dim = 16; }},
      {"interleaved", [](AttentionSpec& s, std::mt19937&) { s.rope->interleaved = true; }},
  };
  for (const Feature& f : features) {
    AttentionSpec s = base_spec(g);
    f.set(s, g);
    const auto why = tt->supports(s, in), why_decode = tt->supports_decode(s);
    ASSERT_TRUE(why) << f.word;
    EXPECT_NE(why->find(f.word), std::string::npos) << *why;
    ASSERT_TRUE(why_decode) << f.word;
    EXPECT_NE(why_decode->find(f.word), std::string::npos) << *why_decode;
    EXPECT_THROW(tt->run(s, in, {}), InputError) << f.word;
  }
}

// QK-norm and sinks run as TT-NN's model code runs them, on the SDPA
// pipeline only (tests/ttsim/hf_families_ttsim_test.cpp holds their
// numbers); attention "ops" refuses them naming the feature.
TEST(SpecFeatures, TtSimRunsQkNormAndSinksOnSdpaOnly) {
  std::mt19937 g(5);
  const AttentionInputs in = inputs(g);
  auto tt = make_ttsim_backend(nlohmann::ordered_json::object(), "backend");
  auto ops = make_ttsim_backend({{"attention", "ops"}}, "backend");
  AttentionSpec norm = base_spec(g), sinks = base_spec(g);
  norm.qk_norm = QkNorm{test::rand_tensor(g, {32}, -1, 1), test::rand_tensor(g, {32}, -1, 1)};
  sinks.sinks = test::rand_tensor(g, {2}, -1, 1);
  for (const auto& [s, word] : {std::pair{&norm, "QK RMSNorm"}, {&sinks, "sinks"}}) {
    EXPECT_FALSE(tt->supports(*s, in)) << *tt->supports(*s, in);
    EXPECT_FALSE(tt->supports_decode(*s)) << *tt->supports_decode(*s);
    EXPECT_EQ(tt->run(*s, in, {}).output.shape(), (Shape{1, 8, 64}));
    AttentionSpec plain = *s;
    plain.rope.reset();  // a rotary spec is refused on "ops" for its rope first
    const auto why = ops->supports(plain, in);
    ASSERT_TRUE(why) << word;
    EXPECT_NE(why->find(word), std::string::npos) << *why;
  }
}

TEST(SpecFeatures, PartialAttentionRefusesSoftcapAndSinks) {
  std::mt19937 g(3);
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend({{"threads", 1}}, "backend");
  AttentionSpec s = base_spec(g);
  s.qk_norm = QkNorm{test::rand_tensor(g, {32}, -1, 1), test::rand_tensor(g, {32}, -1, 1)};
  for (Backend* b : {ref.get(), cpu.get()}) EXPECT_FALSE(b->supports(Capability::PartialAttention, s)) << b->name();
  s.softcap = 20.0;
  for (Backend* b : {ref.get(), cpu.get()}) EXPECT_TRUE(b->supports(Capability::PartialAttention, s)) << b->name();
  s.softcap = 0.0;
  s.sinks = test::rand_tensor(g, {2}, -1, 1);
  for (Backend* b : {ref.get(), cpu.get()}) EXPECT_TRUE(b->supports(Capability::PartialAttention, s)) << b->name();
}

// Partial rotary leaves the unrotated columns as they were; interleaved
// pairs rotate (2d, 2d + 1): a unit vector in column 0 at angle a lands
// as (cos a, sin a) in columns 0 and half resp. 1.
TEST(SpecFeatures, PartialAndInterleavedRotaryTouchTheirColumnsOnly) {
  std::mt19937 g(4);
  AttentionSpec s = base_spec(g);
  s.rope->rotary_dim = 8;
  for (bool interleaved : {false, true}) {
    s.rope->interleaved = interleaved;
    const RopeTable t = rope_table_at(s, 3, 1);
    ASSERT_EQ(t.half, 4);
    std::vector<double> x(32);
    for (int d = 0; d < 32; ++d) x[d] = d == 0 ? 1.0 : (d >= 8 ? d : 0.0);
    apply_rope_rows(t, x.data(), 32, 0, 1, 1);
    EXPECT_EQ(x[0], static_cast<double>(t.cos[0]));
    EXPECT_EQ(x[interleaved ? 1 : 4], static_cast<double>(t.sin[0]));
    for (int d = 8; d < 32; ++d) EXPECT_EQ(x[d], d) << "column " << d << " is past rotary_dim";
  }
}

}  // namespace
}  // namespace mha
