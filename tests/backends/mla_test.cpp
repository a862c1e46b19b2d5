// Multi-head latent attention (AttentionSpec::mla) built by variant
// mla_attention from params, on random shapes and seeds (the float64 oracle
// of transformers' module is tests/hf/hf_oracle.py, run in
// tests/hf/hf_oracle_test.cpp on DeepSeek-V3 / Kimi K2 folders):
//   run(): the cpu backend's expanded form within float32 tolerances of the
//     reference backend's (atol 1e-5, rtol 1.3e-6);
//   decode (absorbed form over the latent cache), float32 cache: the
//     reference within float64 rounding of its run(), the cpu within float32
//     tolerances of it;
//   other cache dtypes: the cpu and reference decodes within 4u * max|out|
//     of each other (the same rounded latent rows; the cpu's integer scores
//     round the absorbed query by up to u), and the reference decode within
//     docs/CONFIG.md's MLA bound of the exact run: 4u * max|c| * |W_vb|inf *
//     |W_o|inf (c the normalised latent, |W|inf the largest row abs-sum);
//   bytes: the cpu session holds one latent row per position.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kv_format.h"
#include "backends/reference/reference_backend.h"
#include "backends/ttsim/ttsim_backend.h"
#include "support/test_support.h"
#include "util/error.h"
#include "variants/variant.h"

namespace mha {
namespace {

struct MlaCase {
  int64_t hidden = 64, heads = 4, q_lora = 48, kv_lora = 64, nope = 16, rope = 32, v = 24;
  int64_t B = 2, P = 5, T = 4;
  bool bias = false;
};

// The variant from params, its torch-initialised weights with the norms
// moved off 1, and the spec.
AttentionSpec make_mla(const MlaCase& c, uint64_t seed, TensorMap& w) {
  ordered_json p = {{"hidden_size", c.hidden}, {"num_attention_heads", c.heads}, {"kv_lora_rank", c.kv_lora},
                    {"qk_nope_head_dim", c.nope}, {"qk_rope_head_dim", c.rope}, {"v_head_dim", c.v},
                    {"attention_bias", c.bias},
                    {"rope_scaling", {{"type", "yarn"}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 0.7},
                                      {"original_max_position_embeddings", 8}}}};
  p["q_lora_rank"] = c.q_lora > 0 ? ordered_json(c.q_lora) : ordered_json(nullptr);
  auto v = make_variant("mla_attention", p);
  std::mt19937 g(static_cast<uint32_t>(seed));
  for (auto& [name, t] : v->init_torch(seed)) {
    if (name.find("layernorm") != std::string::npos) t = test::rand_tensor(g, t.shape(), 0.5f, 1.5f);
    w[name] = t;
  }
  return v->build_spec(w, {});
}

Tensor decode(Backend& be, const AttentionSpec& s, const MlaCase& c, const Tensor& x, CacheDtype dt) {
  DecodeOptions o;
  o.cache_dtype = dt, o.batch = c.B, o.max_tokens = c.P + c.T;
  auto sess = be.start_decode(s, o);
  std::vector<Tensor> parts{sess->append(test::token_rows(x, 0, c.P))};
  for (int64_t i = 0; i < c.T; ++i) parts.push_back(sess->append(test::token_rows(x, c.P + i, 1)));
  if (be.name() == "cpu") {
    EXPECT_EQ(sess->cache_bytes(), c.B * (c.P + c.T) * kv_row_bytes(dt, c.kv_lora + c.rope));
  }
  const int64_t L = c.P + c.T, O = s.out_dim();
  std::vector<double> all(c.B * L * O);
  int64_t r0 = 0;
  for (const Tensor& y : parts) {
    const int64_t n = y.dim(1);
    const std::vector<double> v = y.to_f64();
    for (int64_t b = 0; b < c.B; ++b)
      std::copy(v.begin() + b * n * O, v.begin() + (b + 1) * n * O, all.begin() + (b * L + r0) * O);
    r0 += n;
  }
  return Tensor::from_f64({c.B, L, O}, all);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The largest row abs-sum of a [rows, cols] weight (rows r0.. of each block).
double row_norm(const Tensor& w, int64_t r0, int64_t rows, int64_t stride) {
  const std::vector<double> v = w.to_f64();
  const int64_t cols = w.dim(1);
  double m = 0;
  for (int64_t b = r0; b < w.dim(0); b += stride)
    for (int64_t r = b; r < b + rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += std::fabs(v[r * cols + j]);
      m = std::max(m, s);
    }
  return m;
}

// max|c| over x's rows: rmsnorm(x @ kv_a^T [:kv_lora]) * kv_norm, in float64.
double max_latent(const AttentionSpec& s, const Tensor& x) {
  const std::vector<double> xs = x.to_f64(), wa = s.k.weight.to_f64(), wn = s.mla->kv_norm.to_f64();
  const std::vector<double> ba = s.k.bias ? s.k.bias->to_f64() : std::vector<double>(s.k.weight.dim(0), 0.0);
  const int64_t in = s.k.weight.dim(1), kl = s.mla->kv_lora_rank;
  double m = 0;
  for (int64_t r = 0; r < x.numel() / in; ++r) {
    std::vector<double> c(kl);
    double ss = 0;
    for (int64_t o = 0; o < kl; ++o) {
      c[o] = ba[o];
      for (int64_t i = 0; i < in; ++i) c[o] += xs[r * in + i] * wa[o * in + i];
      ss += c[o] * c[o];
    }
    const double inv = 1 / std::sqrt(ss / kl + s.mla->eps);
    for (int64_t o = 0; o < kl; ++o) m = std::max(m, std::fabs(c[o] * inv * wn[o]));
  }
  return m;
}

void check(const MlaCase& c, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " heads " + std::to_string(c.heads) + " q_lora " +
               std::to_string(c.q_lora) + " kv_lora " + std::to_string(c.kv_lora));
  TensorMap w;
  const AttentionSpec spec = make_mla(c, seed, w);
  std::mt19937 g(static_cast<uint32_t>(seed) + 1);
  const Tensor x = test::rand_tensor(g, {c.B, c.P + c.T, c.hidden}, -2, 2);
  AttentionInputs in;
  in.query = in.key = in.value = x;
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend({{"threads", 3}}, "backend");
  const Tensor full = ref->run(spec, in, {}).output;
  EXPECT_TRUE(test::tensors_close(cpu->run(spec, in, {}).output, full, 1e-5, 1.3e-6));
  EXPECT_TRUE(test::tensors_close(decode(*ref, spec, c, x, CacheDtype::Float32), full, 1e-12, 1e-9));
  EXPECT_TRUE(test::tensors_close(decode(*cpu, spec, c, x, CacheDtype::Float32), full, 1e-5, 1.3e-6));
  const double wvb = row_norm(spec.mla->kv_b.weight, c.nope, c.v, c.nope + c.v);
  const double mla_bound = max_latent(spec, x) * wvb * row_norm(spec.out->weight, 0, spec.out->weight.dim(0), 1 << 30);
  for (CacheDtype dt : kAllCacheDtypes) {
    if (dt == CacheDtype::Float32) continue;
    SCOPED_TRACE(cache_dtype_name(dt));
    const Tensor refq = decode(*ref, spec, c, x, dt), cpuq = decode(*cpu, spec, c, x, dt);
    const double u = kv_error_unit(dt);
    EXPECT_TRUE(test::tensors_close(cpuq, refq, 4 * u * max_abs(full.to_f64()), 0));
    EXPECT_TRUE(test::tensors_close(refq, full, 4 * u * mla_bound, 0));
  }
}

TEST(Mla, RandomShapesAndSeedsEveryCacheDtype) {
  const uint32_t seed = test::test_seed(1);
  check({}, seed);
  MlaCase no_q_lora;  // q_proj, biases, one batch row
  no_q_lora.q_lora = 0, no_q_lora.bias = true, no_q_lora.B = 1, no_q_lora.nope = 32, no_q_lora.v = 32;
  check(no_q_lora, seed + 1);
  MlaCase wide;  // more heads than keys per chunk task, a longer prompt
  wide.heads = 16, wide.kv_lora = 32, wide.rope = 64, wide.P = 19, wide.T = 3;
  check(wide, seed + 2);
  // More heads than one flash block of query rows takes on 3 threads: the
  // decode splits them into blocks of whole vectors, the last one partial
  // (cpu_decode_prefill.h, latent_attention).
  MlaCase many;
  many.heads = 40, many.kv_lora = 32, many.nope = 16, many.v = 16, many.P = 7, many.T = 3;
  check(many, seed + 3);
}

// The cpu decode's bits do not depend on the thread count (docs/CONFIG.md,
// `threads`), though the heads are split into as many flash blocks as
// threads: each head's scores and sums run the same chain in any block.
TEST(Mla, CpuDecodeIsTheSameForAnyThreadCount) {
  MlaCase c;
  c.heads = 40, c.kv_lora = 32, c.nope = 16, c.v = 16, c.P = 7, c.T = 3, c.B = 1;
  TensorMap w;
  const AttentionSpec spec = make_mla(c, 5, w);
  std::mt19937 g(6);
  const Tensor x = test::rand_tensor(g, {c.B, c.P + c.T, c.hidden}, -2, 2);
  const Tensor one = decode(*make_cpu_backend({{"threads", 1}}, "backend"), spec, c, x, CacheDtype::Bfloat16);
  for (int threads : {2, 3, 5}) {
    const Tensor many = decode(*make_cpu_backend({{"threads", threads}}, "backend"), spec, c, x, CacheDtype::Bfloat16);
    EXPECT_EQ(one.to_f64(), many.to_f64()) << threads << " threads";
  }
}

// The spec's widths are checked against each other and the tensors.
TEST(Mla, ContradictingSpecIsRefused) {
  TensorMap w;
  AttentionSpec s = make_mla({}, 1, w);
  s.num_kv_heads = 2;
  AttentionInputs in;
  in.query = in.key = in.value = Tensor(DType::F32, {1, 3, 64});
  EXPECT_THROW(make_reference_backend()->run(s, in, {}), InputError);
  AttentionSpec t = make_mla({}, 1, w);
  t.mla->kv_norm = Tensor(DType::F32, {8});
  EXPECT_THROW(make_cpu_backend({}, "backend")->run(t, in, {}), InputError);
}

// What has no MLA refuses it with the reason: tt-sim (run and decode) where
// its flash MLA pipeline cannot take the widths (q_lora_rank 48 is not whole
// tiles; tests/ttsim/mla_pipeline_test.cpp runs the widths it takes), and
// partial attention (ring runs) on both host backends.
TEST(Mla, RefusedWhereNotImplemented) {
  TensorMap w;
  const AttentionSpec s = make_mla({}, 2, w);
  AttentionInputs in;
  in.query = in.key = in.value = Tensor(DType::F32, {1, 3, 64});
  auto tt = make_ttsim_backend({}, "backend");
  ASSERT_TRUE(tt->supports(s, in).has_value());
  EXPECT_NE(tt->supports(s, in)->find("q_lora_rank in whole tiles"), std::string::npos) << *tt->supports(s, in);
  ASSERT_TRUE(tt->supports_decode(s).has_value());
  EXPECT_NE(tt->supports_decode(s)->find("q_lora_rank in whole tiles"), std::string::npos);
  std::vector<std::unique_ptr<Backend>> hosts;
  hosts.push_back(make_cpu_backend({}, "backend"));
  hosts.push_back(make_reference_backend());
  for (const auto& owned : hosts) {
    const auto why = owned->supports(Capability::PartialAttention, s);
    ASSERT_TRUE(why.has_value()) << owned->name();
    EXPECT_NE(why->find("no multi-head latent attention"), std::string::npos) << *why;
    EXPECT_FALSE(owned->supports_decode(s).has_value()) << owned->name();
  }
}

}  // namespace
}  // namespace mha
