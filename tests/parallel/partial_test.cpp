// The partial-attention primitive (backends/partial.h) that ring attention
// is built from, on one process: queries attending key blocks at offset
// positions, carrying the online-softmax state, agree with the backend's own
// run() over the whole sequence; so do two states of disjoint key blocks
// merged. Tolerances are the ring's documented ones (docs/CONFIG.md): the
// blocks are summed in another order than run() sums them.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/backend.h"
#include "support/test_support.h"

namespace mha {
namespace {

struct Case {
  bool causal = false;
  int64_t window = 0;
};

AttentionSpec make_spec(std::mt19937& g, const Case& c) {
  AttentionSpec s;
  s.variant = "partial_test";
  s.num_heads = 4, s.num_kv_heads = 2, s.head_dim = 16, s.head_dim_v = 8;
  s.q = test::rand_proj(g, 4 * 16, 32, true);
  s.k = test::rand_proj(g, 2 * 16, 32, true);
  s.v = test::rand_proj(g, 2 * 8, 32, false);
  s.scale = 0.25;
  s.causal = c.causal;
  s.window = c.window;
  return s;
}

Projection as(const Projection& p, DType dt) {
  return Projection{p.weight.cast(dt), p.bias ? std::optional<Tensor>(p.bias->cast(dt)) : std::nullopt};
}

// Rows [r0, r0 + n) of t [B, L, W] as a contiguous [B, n, W].
Tensor rows(const Tensor& t, int64_t r0, int64_t n) {
  const int64_t B = t.dim(0), L = t.dim(1), row = t.nbytes() / (B * L);
  Tensor r(t.dtype(), {B, n, t.dim(2)});
  for (int64_t b = 0; b < B; ++b) std::memcpy(r.raw() + b * n * row, t.raw() + (b * L + r0) * row, n * row);
  return r;
}

Tensor project(Backend& be, const Projection& p, const Tensor& x) {
  Tensor y(x.dtype(), {x.dim(0), x.dim(1), p.weight.dim(0)});
  be.project_rows(as(p, x.dtype()), x.raw(), x.dim(0) * x.dim(1), y.raw());
  return y;
}

// Key blocks [0, 130) and [130, L); query blocks [0, 170) and [170, L).
// `into` chooses the state each key block is attended into.
void attend_blocks(Backend& be, const AttentionSpec& s, const Tensor& x, SoftmaxState* into[2]) {
  const int64_t L = x.dim(1);
  const Tensor q = project(be, s.q, x), k = project(be, s.k, x), v = project(be, s.v, x);
  const int64_t kcut[3] = {0, 130, L}, qcut[3] = {0, 170, L};
  for (int kb = 0; kb < 2; ++kb) {
    const Tensor kr = rows(k, kcut[kb], kcut[kb + 1] - kcut[kb]), vr = rows(v, kcut[kb], kcut[kb + 1] - kcut[kb]);
    const KeyBlock keys{kr.raw(), vr.raw(), kr.dim(1), kcut[kb]};
    for (int qb = 0; qb < 2; ++qb)
      be.attend_partial(s, q, QueryBlock{qcut[qb], qcut[qb + 1] - qcut[qb], qcut[qb]}, keys, *into[kb]);
  }
}

void check_backend(const std::string& name, double atol, double rtol) {
  auto be = make_backend(name, nlohmann::ordered_json::object(), "backend");
  ASSERT_FALSE(be->supports(Capability::PartialAttention, AttentionSpec())) << name;
  const DType dt = be->arithmetic_dtype();
  for (const Case c : {Case{false, 0}, Case{true, 0}, Case{true, 37}, Case{false, 50}}) {
    std::mt19937 g(7);
    const AttentionSpec s = make_spec(g, c);
    const int64_t B = 2, L = 300;
    const Tensor x = test::rand_tensor(g, {B, L, 32}, -1.0f, 1.0f).cast(dt);
    AttentionInputs in;
    in.query = in.key = in.value = x;
    const Tensor want = be->run(s, in, {}).output;  // [B, L, H*dv]
    const std::string what = name + " causal " + std::to_string(c.causal) + " window " + std::to_string(c.window);

    SoftmaxState carried = SoftmaxState::empty(dt, B, L, s.num_heads, s.head_dim_v);
    SoftmaxState* both[2] = {&carried, &carried};
    attend_blocks(*be, s, x, both);
    normalise_state(carried);
    EXPECT_TRUE(test::tensors_close(carried.acc, want, atol, rtol)) << what << ": carried state";

    SoftmaxState a = SoftmaxState::empty(dt, B, L, s.num_heads, s.head_dim_v), b = a;
    b = SoftmaxState::empty(dt, B, L, s.num_heads, s.head_dim_v);
    SoftmaxState* split[2] = {&a, &b};
    attend_blocks(*be, s, x, split);
    be->merge_partial(a, b);
    normalise_state(a);
    EXPECT_TRUE(test::tensors_close(a.acc, want, atol, rtol)) << what << ": merged states";
  }
}

TEST(PartialAttention, CpuMatchesItsRun) { check_backend("cpu", 2e-6, 1e-5); }

TEST(PartialAttention, ReferenceMatchesItsRun) { check_backend("reference", 1e-12, 1e-10); }

// tt-sim has no partial attention; its output projection is the SDPA
// pipeline's (HeadsShare.TtSimSdpaMatchesOneProcessBitwise), so a spec on
// the op sequence (a default spec is not causal) has none.
TEST(PartialAttention, TtSimSaysNotSupported) {
  auto be = make_backend("tt-sim", nlohmann::ordered_json::object(), "backend");
  EXPECT_EQ(be->supports(Capability::PartialAttention, AttentionSpec()), std::optional<std::string>("no partial attention"));
  const auto why = be->supports(Capability::OutputProjection, AttentionSpec());
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->rfind("attention \"ops\" has no separate output projection: ", 0), 0u) << *why;
}

}  // namespace
}  // namespace mha
