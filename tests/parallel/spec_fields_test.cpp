// The spec visited once (model/spec_fields.h): the visitor lists every member
// of AttentionSpec, Projection and RotaryEmbedding (counted by aggregate
// initialisation, so a new member without a line there fails here), every
// field survives the wire format between ranks, and head sharding and
// float64 narrowing treat every tensor field, the fused and in x out copies
// included.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/spec_fields.h"
#include "parallel/head_parallel.h"
#include "parallel/wire.h"
#include "support/test_support.h"
#include "tensor/tensor_ops.h"

namespace mha {
namespace spec_fields_test {

// The number of members of an aggregate: the most initialisers T{...}
// accepts, each one converting to whatever its member is.
struct AnyMember {
  template <class T>
  operator T&() const;  // only named in unevaluated contexts
};
template <class T, class Seq, class = void>
struct brace_initialisable : std::false_type {};
template <class T, std::size_t... I>
struct brace_initialisable<T, std::index_sequence<I...>, std::void_t<decltype(T{(void(I), AnyMember{})...})>>
    : std::true_type {};
template <class T, std::size_t N = 0>
constexpr std::size_t member_count() {
  if constexpr (brace_initialisable<T, std::make_index_sequence<N + 1>>::value) return member_count<T, N + 1>();
  else return N;
}

}  // namespace spec_fields_test

namespace {

using spec_fields_test::member_count;

TEST(SpecFields, VisitorListsEveryMember) {
  static_assert(std::is_aggregate<AttentionSpec>::value && std::is_aggregate<Projection>::value, "");
  int spec_fields = 0, projection_fields = 0;
  AttentionSpec s;
  visit_spec(s, [&](const char*, auto&, HeadLayout) { ++spec_fields; });
  visit_projection(s.q, [&](const char*, auto&, ProjectionAxis) { ++projection_fields; });
  EXPECT_EQ(spec_fields, kVisitedSpecFields);
  EXPECT_EQ(projection_fields, kVisitedProjectionFields);
  EXPECT_EQ(member_count<AttentionSpec>(), static_cast<std::size_t>(kVisitedSpecFields) + 1)
      << "AttentionSpec has a member visit_spec() does not list (uid is the one left out)";
  EXPECT_EQ(member_count<Projection>(), static_cast<std::size_t>(kVisitedProjectionFields))
      << "Projection has a member visit_projection() does not list";
  int rope_fields = 0, norm_fields = 0;
  const RotaryEmbedding rope;
  const QkNorm norm;
  visit_rope(rope, [&](const auto&) { ++rope_fields; });
  visit_qk_norm(norm, [&](const auto&) { ++norm_fields; });
  EXPECT_EQ(rope_fields, kVisitedRopeFields);
  EXPECT_EQ(norm_fields, kVisitedQkNormFields);
  EXPECT_EQ(member_count<RotaryEmbedding>(), static_cast<std::size_t>(kVisitedRopeFields))
      << "RotaryEmbedding has a member visit_rope() does not list";
  EXPECT_EQ(member_count<QkNorm>(), static_cast<std::size_t>(kVisitedQkNormFields))
      << "QkNorm has a member visit_qk_norm() does not list";
  int mla_fields = 0;
  const Mla mla;
  visit_mla(mla, [&](const auto&) { ++mla_fields; });
  EXPECT_EQ(mla_fields, kVisitedMlaFields);
  EXPECT_EQ(member_count<Mla>(), static_cast<std::size_t>(kVisitedMlaFields))
      << "Mla has a member visit_mla() does not list";
}

// A field's value as text (tensors by dtype, shape and bytes), through the
// same visitor, so that two specs compare field by field by name.
std::string text(const std::string& x) { return "'" + x + "'"; }
std::string text(bool x) { return x ? "true" : "false"; }
std::string text(int64_t x) { return std::to_string(x); }
std::string text(OpSequence x) { return op_sequence_name(x); }
std::string text(AttentionKernel x) { return attention_kernel_name(x); }
std::string text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}
std::string text(RopeScaling x) { return rope_scaling_name(x); }
std::string text(const Tensor& t);
std::string text(const RotaryEmbedding& x) {
  std::string s = "rope(";
  visit_rope(x, [&](const auto& f) { s += text(f) + " "; });
  return s + ")";
}
std::string text(const QkNorm& x) {
  std::string s = "qk_norm(";
  visit_qk_norm(x, [&](const auto& f) { s += text(f) + " "; });
  return s + ")";
}
std::string text(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + "[";
  for (int64_t d : t.shape()) s += std::to_string(d) + ",";
  s += "]";
  char hex[3];
  for (std::size_t i = 0; i < t.nbytes(); ++i) {
    std::snprintf(hex, sizeof hex, "%02x", t.raw()[i]);
    s += hex;
  }
  return s;
}
template <class T>
std::string text(const std::optional<T>& x);
std::string text(const Mla& m);
std::string text(const Projection& p) {
  std::string s;
  visit_projection(p, [&](const char* name, const auto& f, ProjectionAxis) { s += std::string(name) + "=" + text(f) + " "; });
  return s;
}
template <class T>
std::string text(const std::optional<T>& x) {
  return x ? text(*x) : "none";
}
std::string text(const Mla& m) {
  std::string s;
  visit_mla(m, [&](const auto& f) { s += text(f) + " "; });
  return s;
}

std::vector<std::pair<std::string, std::string>> fields(const AttentionSpec& s) {
  std::vector<std::pair<std::string, std::string>> r;
  visit_spec(s, [&](const char* name, const auto& f, HeadLayout) { r.emplace_back(name, text(f)); });
  return r;
}

// Every field set, none to its default: distinct numbers, tensors of
// distinct shapes and values, every optional present.
struct Fill {
  std::mt19937 g{7};
  int64_t n = 0;
  Tensor tensor() {
    ++n;
    return test::rand_tensor(g, {n % 3 + 1, 2}, -1.0f, 1.0f);
  }
  void operator()(std::string& x) { x = "variant" + std::to_string(++n); }
  void operator()(bool& x) { x = !x; }
  void operator()(int64_t& x) { x = 100 + ++n; }
  void operator()(OpSequence& x) { x = OpSequence::TtnnMhaFused; }
  void operator()(AttentionKernel& x) { x = AttentionKernel::Sdpa; }
  void operator()(double& x) { x = 0.25 + static_cast<double>(++n); }
  void operator()(RopeScaling& x) { x = RopeScaling::Yarn; }
  void operator()(RotaryEmbedding& x) {
    visit_rope(x, [&](auto& f) { (*this)(f); });
  }
  void operator()(QkNorm& x) {
    visit_qk_norm(x, [&](auto& f) { (*this)(f); });
  }
  void operator()(Mla& x) {
    visit_mla(x, [&](auto& f) { (*this)(f); });
  }
  void operator()(Tensor& x) { x = tensor(); }
  void operator()(Projection& p) {
    visit_projection(p, [&](const char*, auto& f, ProjectionAxis) { (*this)(f); });
  }
  template <class T>
  void operator()(std::optional<T>& x) {
    x.emplace();
    (*this)(*x);
  }
};

TEST(SpecFields, EveryFieldSurvivesTheWire) {
  AttentionSpec s;
  Fill fill;
  visit_spec(s, [&](const char*, auto& f, HeadLayout) { fill(f); });
  const auto want = fields(s), defaults = fields(AttentionSpec{});
  ASSERT_EQ(want.size(), defaults.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NE(want[i].second, defaults[i].second) << want[i].first << " was left at its default by the test";

  parallel::Writer w;
  parallel::write_spec(w, s);
  w.i64(12345);  // whatever follows the spec is read where it was written
  parallel::Reader r(w.bytes());
  const AttentionSpec back = parallel::read_spec(r);
  EXPECT_EQ(r.i64(), 12345);
  const auto got = fields(back);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << want[i].first << " did not survive";
  EXPECT_NE(back.uid, s.uid) << "the received spec is a new spec for plan caches";
}

// A spec whose module stores its weights twice (in x out, and fused), as
// seed 002's ttnn_mha_fused does: H = 4 query heads of dh = 3, Hkv = 2
// key/value heads, dv = 2, input width 5.
AttentionSpec stored_twice_spec() {
  std::mt19937 g(11);
  AttentionSpec s;
  s.num_heads = 4, s.num_kv_heads = 2, s.head_dim = 3, s.head_dim_v = 2;
  s.q = test::rand_proj(g, 12, 5, true);
  s.k = test::rand_proj(g, 6, 5, true);
  s.v = test::rand_proj(g, 4, 5, true);
  s.out = test::rand_proj(g, 5, 8, true);
  s.bias_k = test::rand_tensor(g, {6}, -1, 1);
  s.bias_v = test::rand_tensor(g, {4}, -1, 1);
  for (Projection* p : {&s.q, &s.k, &s.v}) p->weight_in_out = transpose2d(p->weight);
  Projection fused{concat_rows({s.q.weight, s.k.weight, s.v.weight}),
                   concat_rows({*s.q.bias, *s.k.bias, *s.v.bias}), std::nullopt};
  fused.weight_in_out = transpose2d(fused.weight);
  s.qkv_fused = fused;
  return s;
}

::testing::AssertionResult same(const Tensor& a, const Tensor& b) {
  if (text(a) == text(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text(a) << " vs " << text(b);
}

TEST(SpecFields, HeadShareCutsEveryPerHeadTensor) {
  const AttentionSpec s = stored_twice_spec();
  for (int64_t part = 0; part < 2; ++part) {
    const AttentionSpec r = parallel::heads_share(s, part, 2);
    EXPECT_EQ(r.num_heads, 2);
    EXPECT_EQ(r.num_kv_heads, 1);
    EXPECT_FALSE(r.out) << "rank 0 applies the output projection to the gathered context";
    EXPECT_TRUE(same(r.q.weight, slice_rows(s.q.weight, part * 6, 6)));
    EXPECT_TRUE(same(*r.q.bias, slice_rows(*s.q.bias, part * 6, 6)));
    EXPECT_TRUE(same(r.k.weight, slice_rows(s.k.weight, part * 3, 3)));
    EXPECT_TRUE(same(r.v.weight, slice_rows(s.v.weight, part * 2, 2)));
    EXPECT_TRUE(same(*r.bias_k, slice_rows(*s.bias_k, part * 3, 3)));
    EXPECT_TRUE(same(*r.bias_v, slice_rows(*s.bias_v, part * 2, 2)));
    for (const Projection* p : {&r.q, &r.k, &r.v}) {
      ASSERT_TRUE(p->weight_in_out);
      EXPECT_TRUE(same(*p->weight_in_out, transpose2d(p->weight))) << "in x out columns of the share's heads";
    }
    ASSERT_TRUE(r.qkv_fused);
    EXPECT_TRUE(same(r.qkv_fused->weight, concat_rows({r.q.weight, r.k.weight, r.v.weight})));
    EXPECT_TRUE(same(*r.qkv_fused->bias, concat_rows({*r.q.bias, *r.k.bias, *r.v.bias})));
    EXPECT_TRUE(same(*r.qkv_fused->weight_in_out, transpose2d(r.qkv_fused->weight)));
  }
}

TEST(SpecFields, NarrowingReachesEveryTensor) {
  AttentionSpec s = stored_twice_spec();
  visit_spec(s, [](const char*, auto& f, HeadLayout) {
    for_each_tensor(f, [](Tensor& t) { t = t.cast(DType::F64); });
  });
  ASSERT_TRUE(spec_holds_f64(s));
  const AttentionSpec n = spec_as_f32(s);
  EXPECT_FALSE(spec_holds_f64(n));
  EXPECT_NE(n.uid, s.uid);
  int tensors = 0;
  visit_spec(n, [&](const char*, const auto& f, HeadLayout) { for_each_tensor(f, [&](const Tensor&) { ++tensors; }); });
  EXPECT_EQ(tensors, 3 * 3 + 2 + 2 + 3) << "q, k, v with bias and in x out copy; out; bias_k, bias_v; fused";
  EXPECT_TRUE(same(n.qkv_fused->weight_in_out->cast(DType::F64), *s.qkv_fused->weight_in_out));
  EXPECT_TRUE(same(n.q.weight.cast(DType::F64), s.q.weight)) << "float32 values widened exactly and back";
}

}  // namespace
}  // namespace mha
