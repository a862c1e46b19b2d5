// The cpu backend against the float64 reference on specs built directly
// (random weights), across odd shapes and every masking feature.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_plan.h"
#include "backends/reference/reference_backend.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1.3e-6;  // torch.testing's float32 tolerances

struct CpuCase {
  int64_t B = 2, L = 7, S = 7, H = 2, Hkv = 2, dh = 4, dv = 4;
  int64_t q_in = 8, k_in = 8, v_in = 8;
  bool self = true;  // query, key and value are one tensor (needs L == S, equal in-dims)
  bool kv_same = false;  // without self: key and value are one tensor (needs k_in == v_in)
  bool qkv_bias = true, out = true;
  int64_t out_dim = 8;
  bool causal = false;
  int64_t window = 0;
  bool bias_kv = false, zero_attn = false;
  int mask = 0;  // 0 none, 1 (1,1,L,St), 2 (B,1,L,St), 3 (1,H,L,St), 4 (B,H,L,St)
  bool mask_row = false;  // the mask has one row that every query adds: L above becomes 1
  bool inf_rows = false;  // mask some whole rows with -inf (NaN outputs) and scattered entries
  double dropout = 0.0;
  bool rope = false;       // rotary embedding (needs L == S, even dh)
  bool positions = false;  // with it: random position ids [B, L] instead of 0..L-1
};

using test::rand_proj;
using test::rand_tensor;

struct Problem {
  AttentionSpec spec;
  AttentionInputs in;
};

Problem make_problem(const CpuCase& c, uint32_t seed = 1) {
  std::mt19937 g(seed);
  Problem p;
  AttentionSpec& s = p.spec;
  s.variant = "test";
  s.num_heads = c.H, s.num_kv_heads = c.Hkv, s.head_dim = c.dh, s.head_dim_v = c.dv;
  s.q = rand_proj(g, c.H * c.dh, c.q_in, c.qkv_bias);
  s.k = rand_proj(g, c.Hkv * c.dh, c.k_in, c.qkv_bias);
  s.v = rand_proj(g, c.Hkv * c.dv, c.v_in, c.qkv_bias);
  if (c.out) s.out = rand_proj(g, c.out_dim, c.H * c.dv, true);
  s.scale = 1.0 / std::sqrt(static_cast<double>(c.dh));
  s.causal = c.causal, s.window = c.window;
  if (c.bias_kv) {
    s.bias_k = rand_tensor(g, {c.Hkv * c.dh}, -1, 1);
    s.bias_v = rand_tensor(g, {c.Hkv * c.dv}, -1, 1);
  }
  s.add_zero_attn = c.zero_attn;
  s.dropout = c.dropout;
  if (c.rope) s.rope = RotaryEmbedding{500000.0};
  AttentionInputs& in = p.in;
  in.query = rand_tensor(g, {c.B, c.L, c.q_in}, -2, 2);
  if (c.self) {
    in.key = in.value = in.query;
  } else {
    in.key = rand_tensor(g, {c.B, c.S, c.k_in}, -2, 2);
    in.value = c.kv_same ? in.key : rand_tensor(g, {c.B, c.S, c.v_in}, -2, 2);
  }
  if (c.positions) {
    Tensor pos(DType::I64, {c.B, c.L});
    std::uniform_int_distribution<int64_t> u(0, 40000);
    for (int64_t i = 0; i < pos.numel(); ++i) pos.data<int64_t>()[i] = u(g);
    in.positions = pos;
  }
  if (c.mask) {
    const int64_t St = c.S + s.extra_keys();
    const int64_t mb = (c.mask == 2 || c.mask == 4) ? c.B : 1, mh = (c.mask == 3 || c.mask == 4) ? c.H : 1;
    const int64_t ml = c.mask_row ? 1 : c.L;
    Tensor m = rand_tensor(g, {mb, mh, ml, St}, -1, 1);
    if (c.inf_rows) {
      float* d = m.data<float>();
      const float inf = std::numeric_limits<float>::infinity();
      std::uniform_int_distribution<int64_t> pick(0, m.numel() - 1);
      for (int n = 0; n < m.numel() / 5; ++n) d[pick(g)] = -inf;
      for (int64_t r = 0; r < mb * mh * ml; r += 3)
        for (int64_t j = 0; j < St; ++j) d[r * St + j] = -inf;
    }
    in.mask = m;
  }
  if (c.dropout > 0) in.training = true, in.dropout_seed = 99;
  return p;
}

std::unique_ptr<Backend> cpu_backend(int threads = 2) {
  return make_cpu_backend(nlohmann::ordered_json{{"threads", threads}}, "$.backend");
}

void expect_matches_reference(const CpuCase& c, RunOptions opt = {}) {
  Problem p = make_problem(c);
  auto cpu = cpu_backend();
  AttentionResult got = cpu->run(p.spec, p.in, opt);
  AttentionResult want = make_reference_backend()->run(p.spec, p.in, opt);
  EXPECT_TRUE(test::tensors_close(got.output, want.output, kAtol, kRtol));
  ASSERT_EQ(got.weights.has_value(), want.weights.has_value());
  if (want.weights) {
    EXPECT_TRUE(test::tensors_close(*got.weights, *want.weights, kAtol, kRtol));
  }
  if (opt.collect_stages) {
    ASSERT_EQ(got.stages.size(), want.stages.size());
    for (size_t i = 0; i < want.stages.size(); ++i) {
      EXPECT_EQ(got.stages[i].first, want.stages[i].first);
      // Raw scores grow with dh: compare them relative to their size.
      const double scale = want.stages[i].first.find("scores") != std::string::npos ? 4.0 : 1.0;
      EXPECT_TRUE(test::tensors_close(got.stages[i].second, want.stages[i].second, scale * kAtol, scale * kRtol))
          << want.stages[i].first;
    }
  }
}

TEST(CpuBackend, SmallSelfAttention) { expect_matches_reference(CpuCase{}); }

TEST(CpuBackend, OddLengthsAndHeadDims) {
  for (int64_t L : {1, 5, 95, 97, 193})
    for (int64_t dh : {1, 3, 64, 100}) {
      CpuCase c;
      c.B = 2, c.L = c.S = L, c.H = 2, c.Hkv = 2, c.dh = c.dv = dh, c.q_in = c.k_in = c.v_in = 24, c.out_dim = 24;
      SCOPED_TRACE("L=" + std::to_string(L) + " dh=" + std::to_string(dh));
      expect_matches_reference(c);
      c.causal = true;
      expect_matches_reference(c);
    }
}

TEST(CpuBackend, CrossAttentionUnequalLengths) {
  for (auto [L, S] : std::vector<std::pair<int64_t, int64_t>>{{1, 200}, {200, 1}, {97, 130}, {130, 97}, {96, 96}}) {
    CpuCase c;
    c.self = false, c.L = L, c.S = S, c.q_in = 12, c.k_in = 20, c.v_in = 9, c.dh = 5, c.dv = 7, c.H = 3, c.Hkv = 3;
    SCOPED_TRACE("L=" + std::to_string(L) + " S=" + std::to_string(S));
    expect_matches_reference(c);
    c.causal = true;  // top-left aligned, rows past S see every key
    expect_matches_reference(c);
  }
}

TEST(CpuBackend, NoKeysGivesAnEmptySum) {
  CpuCase c;
  c.self = false, c.S = 0;
  expect_matches_reference(c);
  c.zero_attn = true;  // one all-zero key row
  expect_matches_reference(c);
}

TEST(CpuBackend, SharedKeyValueTensor) {
  CpuCase c;
  c.self = false, c.kv_same = true, c.L = 50, c.S = 130, c.q_in = 12, c.k_in = c.v_in = 20, c.dv = 6;
  expect_matches_reference(c);
  c.causal = true, c.bias_kv = true;
  expect_matches_reference(c, {true, false});
}

TEST(CpuBackend, SlidingWindow) {
  for (int64_t w : {1, 2, 17, 96, 97, 500}) {
    CpuCase c;
    c.L = c.S = 250, c.window = w;
    SCOPED_TRACE("window=" + std::to_string(w));
    expect_matches_reference(c);
    c.causal = true;
    expect_matches_reference(c);
  }
}

TEST(CpuBackend, MaskBroadcastShapes) {
  for (int mask = 1; mask <= 4; ++mask)
    for (bool inf_rows : {false, true})
      for (bool mask_row : {false, true}) {
        CpuCase c;
        c.L = c.S = 101, c.H = 3, c.Hkv = 3, c.mask = mask, c.inf_rows = inf_rows, c.mask_row = mask_row;
        SCOPED_TRACE("mask=" + std::to_string(mask) + " inf_rows=" + std::to_string(inf_rows) +
                     " mask_row=" + std::to_string(mask_row));
        expect_matches_reference(c);
        expect_matches_reference(c, RunOptions{true, true});  // the plain path
        c.causal = true;
        expect_matches_reference(c);
      }
}

// A one-row mask (Bm, Hm, 1, St) is the same as that row repeated for every
// query: bit for bit, on the flash path (batch groups, chunked queries) and
// the plain one.
TEST(CpuBackend, MaskRowEqualsExpandedMask) {
  cpu::ChunkPolicy saved = cpu::chunk_policy();
  for (int policy = 0; policy < 3; ++policy) {
    if (policy == 1) cpu::chunk_policy().group_rows = 1;          // one batch per group
    if (policy == 2) cpu::chunk_policy() = {1000, 2 * 96, 1};  // chunked queries (one batch per group)
    for (bool plain : {false, true}) {
      CpuCase c;
      c.B = 3, c.L = c.S = 200, c.mask = 2, c.mask_row = true, c.causal = policy == 2;
      SCOPED_TRACE("policy " + std::to_string(policy) + (plain ? " plain" : " flash"));
      Problem p = make_problem(c);
      const Tensor row = *p.in.mask;  // [B, 1, 1, S]
      Tensor full(DType::F32, {c.B, 1, c.L, c.S});
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t i = 0; i < c.L; ++i)
          std::memcpy(full.data<float>() + (b * c.L + i) * c.S, row.data<float>() + b * c.S, c.S * sizeof(float));
      RunOptions opt;
      opt.need_weights = plain;
      auto cpu = cpu_backend();
      Tensor a = cpu->run(p.spec, p.in, opt).output;
      p.in.mask = full;
      Tensor b = cpu->run(p.spec, p.in, opt).output;
      EXPECT_TRUE(test::tensors_close(a, b, 0.0, 0.0));
      expect_matches_reference(c, opt);
    }
  }
  cpu::chunk_policy() = saved;
}

// The rotary embedding on every projection layout (fused qkv, separate,
// key == value, batch groups, chunked queries) and on the plain path, with
// grouped kv heads and a window, against the reference.
TEST(CpuBackend, RopeOnEveryLayout) {
  cpu::ChunkPolicy saved = cpu::chunk_policy();
  for (int policy = 0; policy < 3; ++policy) {
    if (policy == 1) cpu::chunk_policy().group_rows = 1;
    if (policy == 2) cpu::chunk_policy() = {1000, 2 * 96, 1};
    for (int inputs = 0; inputs < 3; ++inputs)
      for (bool positions : {false, true})
        for (bool plain : {false, true}) {
          CpuCase c;
          c.B = 2, c.L = c.S = 230, c.H = 4, c.Hkv = 2, c.dh = c.dv = 16, c.causal = true, c.window = 50;
          c.rope = true, c.positions = positions;
          c.self = inputs == 0, c.kv_same = inputs == 1;
          SCOPED_TRACE("policy " + std::to_string(policy) + " inputs " + std::to_string(inputs) +
                       (positions ? " positions" : "") + (plain ? " plain" : " flash"));
          RunOptions opt;
          opt.need_weights = plain;
          expect_matches_reference(c, opt);
        }
  }
  cpu::chunk_policy() = saved;
  CpuCase c;
  c.rope = true, c.self = false, c.S = 9;
  Problem p = make_problem(c);
  EXPECT_THROW(cpu_backend()->run(p.spec, p.in, {}), InputError);  // a rope needs S == L
}

TEST(CpuBackend, FullyMaskedRowsAreNaN) {
  CpuCase c;
  c.L = c.S = 10, c.mask = 1, c.inf_rows = true;
  Problem p = make_problem(c);
  AttentionResult r = cpu_backend()->run(p.spec, p.in, {});
  EXPECT_TRUE(std::isnan(r.output.data<float>()[0]));  // row 0 is fully masked
  EXPECT_FALSE(std::isnan(r.output.data<float>()[c.out_dim]));
}

TEST(CpuBackend, BiasKvAndZeroAttn) {
  for (bool bias_kv : {false, true})
    for (bool zero_attn : {false, true})
      for (bool causal : {false, true})
        for (int mask : {0, 4}) {
          CpuCase c;
          c.L = c.S = 98, c.bias_kv = bias_kv, c.zero_attn = zero_attn, c.causal = causal, c.mask = mask;
          c.self = false;
          SCOPED_TRACE(std::to_string(bias_kv) + std::to_string(zero_attn) + std::to_string(causal) +
                       std::to_string(mask));
          expect_matches_reference(c);
        }
}

TEST(CpuBackend, GroupedQueryHeads) {
  for (auto [H, Hkv] : std::vector<std::pair<int64_t, int64_t>>{{4, 1}, {4, 2}, {6, 3}}) {
    CpuCase c;
    c.L = c.S = 150, c.H = H, c.Hkv = Hkv, c.dh = 8, c.dv = 12, c.causal = true;
    expect_matches_reference(c);
  }
}

TEST(CpuBackend, NoBiasNoOutputProjection) {
  CpuCase c;
  c.qkv_bias = false, c.out = false, c.L = c.S = 130;
  expect_matches_reference(c);
  c.dv = 6;  // context width differs from q's: not written in place
  expect_matches_reference(c);
}

TEST(CpuBackend, DropoutInTraining) {
  CpuCase c;
  c.L = c.S = 120, c.dropout = 0.3;
  expect_matches_reference(c);
  expect_matches_reference(c, {true, false});
}

TEST(CpuBackend, NeedWeights) {
  CpuCase c;
  c.L = c.S = 77, c.causal = true, c.bias_kv = true, c.zero_attn = true, c.mask = 2;
  expect_matches_reference(c, {true, false});
  c.H = 4, c.Hkv = 2;
  expect_matches_reference(c, {true, false});
}

TEST(CpuBackend, Stages) {
  CpuCase c;
  c.L = c.S = 33, c.window = 5, c.mask = 3, c.bias_kv = true, c.self = false, c.S = 40;
  c.causal = true;
  expect_matches_reference(c, {false, true});
  expect_matches_reference(c, {true, true});
}

TEST(CpuBackend, LargeModelShape) {
  CpuCase c;
  c.B = 1, c.L = c.S = 300, c.H = 4, c.Hkv = 4, c.dh = c.dv = 64, c.q_in = c.k_in = c.v_in = 256, c.out_dim = 256;
  expect_matches_reference(c);
  c.causal = true;
  expect_matches_reference(c);
}

TEST(CpuBackend, RunsAreBitIdentical) {
  CpuCase c;
  c.B = 3, c.L = c.S = 257, c.H = 4, c.Hkv = 4, c.dh = c.dv = 32, c.q_in = c.k_in = c.v_in = 64, c.causal = true;
  Problem p = make_problem(c);
  auto cpu = cpu_backend();
  Tensor first = cpu->run(p.spec, p.in, {}).output;
  for (int i = 0; i < 3; ++i) {
    Tensor again = cpu->run(p.spec, p.in, {}).output;
    ASSERT_EQ(0, std::memcmp(first.raw(), again.raw(), first.nbytes()));
  }
  // A fresh backend (new plan, new workspaces) gives the same bits too.
  Tensor fresh = cpu_backend()->run(p.spec, p.in, {}).output;
  EXPECT_EQ(0, std::memcmp(first.raw(), fresh.raw(), first.nbytes()));
}

TEST(CpuBackend, PlanCacheHitsAndMisses) {
  CpuCase c;
  Problem p = make_problem(c);
  auto cpu = cpu_backend();
  EXPECT_EQ(cpu->cache_stats().misses, 0);
  cpu->run(p.spec, p.in, {});
  cpu->run(p.spec, p.in, {});
  cpu->run(p.spec, p.in, {});
  EXPECT_EQ(cpu->cache_stats().misses, 1);
  EXPECT_EQ(cpu->cache_stats().hits, 2);
  cpu->run(p.spec, p.in, {true, false});  // a different path: its own plan
  EXPECT_EQ(cpu->cache_stats().misses, 2);
  CpuCase longer = c;
  longer.L = longer.S = 9;
  Problem q = make_problem(longer);
  cpu->run(p.spec, q.in, {});  // same spec, new shapes
  EXPECT_EQ(cpu->cache_stats().misses, 3);
  Problem other = make_problem(c, 2);  // a different spec object
  cpu->run(other.spec, p.in, {});
  EXPECT_EQ(cpu->cache_stats().misses, 4);
  cpu->run(p.spec, p.in, {});
  EXPECT_EQ(cpu->cache_stats().hits, 3);
}

TEST(CpuBackend, NewSpecAtAFreedSpecsAddressIsNotStale) {
  CpuCase c;
  auto cpu = cpu_backend();
  std::optional<Problem> p;
  p.emplace(make_problem(c, 1));
  const AttentionSpec* first = &p->spec;
  cpu->run(p->spec, p->in, {});
  p.reset();
  p.emplace(make_problem(c, 2));  // same storage, same shapes, other weights
  ASSERT_EQ(first, &p->spec);
  AttentionResult got = cpu->run(p->spec, p->in, {});
  AttentionResult want = make_reference_backend()->run(p->spec, p->in, {});
  EXPECT_TRUE(test::tensors_close(got.output, want.output, kAtol, kRtol));
  EXPECT_EQ(cpu->cache_stats().misses, 2);
  p->spec.causal = true;  // scalars are checked as well as weights
  got = cpu->run(p->spec, p->in, {});
  want = make_reference_backend()->run(p->spec, p->in, {});
  EXPECT_TRUE(test::tensors_close(got.output, want.output, kAtol, kRtol));
  EXPECT_EQ(cpu->cache_stats().misses, 3);
}

TEST(CpuBackend, ChunkedQueryProjection) {
  // Shrink the policy so these small shapes take the long-sequence layout:
  // q projected, attended and output-projected a few query blocks at a time.
  cpu::ChunkPolicy saved = cpu::chunk_policy();
  cpu::chunk_policy() = {1000, 2 * 96, 1};
  for (bool self : {true, false})
    for (bool causal : {false, true})
      for (bool out : {true, false}) {
        CpuCase c;
        c.B = 2, c.L = c.S = 450, c.self = self, c.causal = causal, c.out = out, c.mask = 2, c.window = causal ? 0 : 130;
        c.bias_kv = !self, c.kv_same = !self && out;
        SCOPED_TRACE(std::to_string(self) + std::to_string(causal) + std::to_string(out));
        expect_matches_reference(c);
        c.dv = 6;  // ctx into its own chunk buffer
        expect_matches_reference(c);
        c.mask_row = true;
        expect_matches_reference(c);
      }
  cpu::chunk_policy() = saved;
}

TEST(CpuBackend, BatchGroups) {
  // With group_rows below one batch's rows, five batches run as groups of
  // 2, 2 and 1 (or 1 each): per-batch masks, extra keys and the context
  // written into q, a buffer or the output, and the dropout keep mask must
  // all follow the group.
  cpu::ChunkPolicy saved = cpu::chunk_policy();
  for (int64_t group_rows : {1, 12})
    for (bool self : {true, false})
      for (bool out : {true, false}) {
        cpu::chunk_policy().group_rows = group_rows;
        CpuCase c;
        c.B = 5, c.L = c.S = 7, c.self = self, c.out = out, c.mask = self ? 4 : 2;
        c.bias_kv = !self, c.zero_attn = !self, c.kv_same = !self && out, c.dropout = out ? 0.25 : 0.0;
        SCOPED_TRACE(std::to_string(group_rows) + std::to_string(self) + std::to_string(out));
        expect_matches_reference(c);
        c.dv = 6;
        expect_matches_reference(c);
        c.mask_row = true;
        expect_matches_reference(c);
        c.L = 9, c.causal = !self;  // cross-attention with more queries than keys
        if (!self) expect_matches_reference(c);
      }
  cpu::chunk_policy() = saved;
}

TEST(CpuBackend, NonFloat32InputsAreConverted) {
  // float64 inputs, shared as self-attention and key == value pass them, or
  // separate: each distinct tensor is converted once and used for its role.
  for (int layout : {0, 1, 2}) {
    CpuCase c;
    c.self = layout == 0, c.kv_same = layout == 1, c.B = 3;
    c.L = layout == 0 ? c.S : 5;
    Problem p = make_problem(c);
    auto to_f64 = [](const Tensor& t) { return t.cast(DType::F64); };
    AttentionInputs in64 = p.in;
    in64.query = to_f64(p.in.query);
    in64.key = c.self ? in64.query : to_f64(p.in.key);
    in64.value = c.self ? in64.query : c.kv_same ? in64.key : to_f64(p.in.value);
    SCOPED_TRACE(layout);
    AttentionResult got = cpu_backend()->run(p.spec, in64, {});
    AttentionResult want = make_reference_backend()->run(p.spec, p.in, {});
    EXPECT_TRUE(test::tensors_close(got.output, want.output, kAtol, kRtol));
  }
}

TEST(CpuBackend, SingleThreadMatchesReference) {
  CpuCase c;
  c.L = c.S = 200, c.causal = true;
  Problem p = make_problem(c);
  AttentionResult got = cpu_backend(1)->run(p.spec, p.in, {});
  AttentionResult want = make_reference_backend()->run(p.spec, p.in, {});
  EXPECT_TRUE(test::tensors_close(got.output, want.output, kAtol, kRtol));
}

TEST(CpuBackend, Options) {
  EXPECT_NO_THROW(make_backend("cpu", nlohmann::ordered_json::object(), "$.backend"));
  EXPECT_NO_THROW(make_backend("cpu", nlohmann::ordered_json{{"threads", 1}}, "$.backend"));
  try {
    make_backend("cpu", nlohmann::ordered_json{{"threads", 2}, {"thread", 2}}, "$.backend");
    FAIL() << "unknown key accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.backend.thread"), std::string::npos) << e.what();
  }
  for (auto bad : {nlohmann::ordered_json(0), nlohmann::ordered_json("2"), nlohmann::ordered_json(1.5)}) {
    try {
      make_backend("cpu", nlohmann::ordered_json{{"threads", bad}}, "$.backend");
      FAIL() << "threads " << bad.dump() << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("$.backend.threads"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuBackend, RejectsBadInputs) {
  CpuCase c;
  Problem p = make_problem(c);
  p.in.query = Tensor(DType::F32, {2, 7, 5});
  EXPECT_THROW(cpu_backend()->run(p.spec, p.in, {}), InputError);
}

}  // namespace
}  // namespace mha
