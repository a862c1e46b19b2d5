// KV-cache decode (backends/decode.h): a prefill of P rows and T single-row
// steps, concatenated, against one causal run over the P + T rows.
//   reference, float32 cache: bitwise equal to the reference's run().
//   cpu, float32 cache: within torch.testing's float32 tolerances of the
//     reference's run() (atol 1e-5, rtol 1.3e-6), as the cpu run() is.
//   other caches (both backends): each cached K and V element is off by at
//     most u times the largest magnitude of its block (kv_error_unit: 2^-8
//     for bfloat16, ...), and the cpu backend's integer scores read the
//     query rounded too (u_q, kv_query_error_unit); each output element is
//     within the bound docs/CONFIG.md derives from them and the exact run's
//     q, k, v and weights (rounding_bound) of the exact run, and the two
//     backends' decodes within the sum of their bounds of each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"
#include "kv_rows.h"
#include "backends/reference/reference_backend.h"
#include "backends/ttsim/ttsim_backend.h"
#include "support/decode_bounds.h"
#include "support/test_support.h"
#include "tensor/half.h"
#include "util/error.h"

namespace mha {
namespace {

struct DCase {
  int64_t B = 1, P = 5, T = 4, H = 4, Hkv = 2, dh = 8, E = 16;
  bool rope = false, bias = false, out = true;
  int64_t window = 0;
  std::vector<int64_t> chunks;  // append sizes after the prompt (default: T ones)
  // Sets the spec's features of today's models (qk_norm, softcap, sinks, rope variants).
  std::function<void(AttentionSpec&, std::mt19937&)> features;
};

using test::rand_proj;
using test::rand_tensor;

AttentionSpec make_spec(const DCase& c, std::mt19937& g) {
  AttentionSpec s;
  s.variant = "test";
  s.num_heads = c.H, s.num_kv_heads = c.Hkv, s.head_dim = c.dh, s.head_dim_v = c.dh;
  s.q = rand_proj(g, c.H * c.dh, c.E, c.bias);
  s.k = rand_proj(g, c.Hkv * c.dh, c.E, c.bias);
  s.v = rand_proj(g, c.Hkv * c.dh, c.E, c.bias);
  if (c.out) s.out = rand_proj(g, c.E, c.H * c.dh, c.bias);
  s.scale = 1.0 / std::sqrt(static_cast<double>(c.dh));
  s.causal = true, s.window = c.window;
  if (c.rope) s.rope = RotaryEmbedding{10000.0};
  if (c.features) c.features(s, g);
  return s;
}

using test::rounding_bounds;
using test::token_rows;
using test::within_bound;

// Prefill + appends, concatenated as float64 [B, P+T, out].
Tensor decode(Backend& be, const AttentionSpec& s, const DCase& c, const Tensor& x, CacheDtype dt) {
  DecodeOptions o;
  o.cache_dtype = dt, o.batch = c.B, o.max_tokens = c.P + c.T;
  auto sess = be.start_decode(s, o);
  std::vector<int64_t> sizes{c.P};
  if (c.chunks.empty()) sizes.insert(sizes.end(), c.T, 1);
  else sizes.insert(sizes.end(), c.chunks.begin(), c.chunks.end());
  const int64_t O = s.out_dim(), L = c.P + c.T;
  std::vector<double> all(c.B * L * O);
  int64_t r0 = 0;
  for (int64_t n : sizes) {
    const Tensor y = sess->append(token_rows(x, r0, n));
    EXPECT_EQ(y.shape(), (Shape{c.B, n, O}));
    const std::vector<double> v = y.to_f64();
    for (int64_t b = 0; b < c.B; ++b)
      std::copy(v.begin() + b * n * O, v.begin() + (b + 1) * n * O, all.begin() + (b * L + r0) * O);
    r0 += n;
    EXPECT_EQ(sess->length(), r0);
  }
  EXPECT_EQ(r0, L);
  if (be.name() == "cpu") {
    EXPECT_EQ(sess->cache_bytes(), c.B * c.Hkv * L * 2 * kv_row_bytes(dt, c.dh));
  }
  return Tensor::from_f64({c.B, L, O}, all);
}

void check_case(const DCase& c, uint32_t seed) {
  SCOPED_TRACE("B=" + std::to_string(c.B) + " P=" + std::to_string(c.P) + " T=" + std::to_string(c.T) +
               " H=" + std::to_string(c.H) + " Hkv=" + std::to_string(c.Hkv) + " dh=" + std::to_string(c.dh) +
               " window=" + std::to_string(c.window) + " rope=" + std::to_string(c.rope));
  std::mt19937 g(seed);
  const AttentionSpec spec = make_spec(c, g);
  const Tensor x = rand_tensor(g, {c.B, c.P + c.T, c.E}, -2, 2);
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend({{"threads", 3}}, "backend");
  AttentionInputs in;
  in.query = in.key = in.value = x;
  RunOptions stages;
  stages.collect_stages = true;
  const AttentionResult exact = ref->run(spec, in, stages);
  const Tensor& full = exact.output;

  const Tensor ref32 = decode(*ref, spec, c, x, CacheDtype::Float32);
  const std::vector<double> a = ref32.to_f64(), b = full.to_f64();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(double) * a.size()), 0) << "reference decode is not bitwise";

  EXPECT_TRUE(test::tensors_close(decode(*cpu, spec, c, x, CacheDtype::Float32), full, 1e-5, 1.3e-6));

  for (CacheDtype dt : kAllCacheDtypes) {
    if (dt == CacheDtype::Float32 || c.dh % cache_dtype_block(dt) != 0) continue;
    SCOPED_TRACE(cache_dtype_name(dt));
    const std::vector<std::vector<double>> bounds = rounding_bounds(spec, exact, dt, {0.0, kv_query_error_unit(dt)});
    const std::vector<double>&ref_bound = bounds[0], &cpu_bound = bounds[1];
    std::vector<double> both(ref_bound.size());
    for (std::size_t i = 0; i < both.size(); ++i) both[i] = ref_bound[i] + cpu_bound[i];
    const Tensor refq = decode(*ref, spec, c, x, dt);
    const Tensor cpuq = decode(*cpu, spec, c, x, dt);
    EXPECT_TRUE(within_bound(refq, full, ref_bound));
    EXPECT_TRUE(within_bound(cpuq, full, cpu_bound));
    EXPECT_TRUE(within_bound(cpuq, refq, both));
  }
}

template <class F>
DCase with(F f) {
  DCase c;
  f(c);
  return c;
}

TEST(Decode, GqaMqaWindowsRopeAndEdges) {
  const uint32_t seed = test::test_seed(1);
  std::vector<DCase> cases;
  cases.push_back({});                                                   // GQA 2
  cases.push_back(with([](DCase& c) { c.B = 2; c.P = 7; c.T = 5; c.H = 8; c.Hkv = 1; }));           // MQA, batch 2
  cases.push_back(with([](DCase& c) { c.P = 1; c.T = 9; c.H = 8; c.Hkv = 2; c.rope = true; }));     // P = 1, GQA 4, rope
  cases.push_back(with([](DCase& c) { c.P = 9; c.T = 0; c.H = 4; c.Hkv = 4; c.rope = true; }));     // T = 0 (prefill only)
  cases.push_back(with([](DCase& c) { c.P = 12; c.T = 8; c.rope = true; c.window = 5; }));         // window < sequence
  cases.push_back(with([](DCase& c) { c.P = 6; c.T = 6; c.rope = true; c.window = 64; }));         // window > sequence
  cases.push_back(with([](DCase& c) { c.P = 4; c.T = 3; c.H = 3; c.Hkv = 3; c.dh = 6; c.E = 9; c.bias = true; c.out = false; }));  // odd widths
  cases.push_back(with([](DCase& c) { c.B = 2; c.P = 3; c.T = 10; c.H = 16; c.Hkv = 2; c.dh = 128; c.E = 64; c.rope = true; c.chunks = {1, 4, 2, 3}; }));                              // dh 128, multi-row appends after the prompt
  cases.push_back(with([](DCase& c) { c.P = 700; c.T = 3; c.H = 4; c.Hkv = 1; c.dh = 64; c.E = 32; c.rope = true; }));  // keys split into chunks
  cases.push_back(with([](DCase& c) { c.P = 600; c.T = 4; c.H = 8; c.Hkv = 2; c.dh = 32; c.E = 32; c.window = 520; }));  // split + window
  for (std::size_t i = 0; i < cases.size(); ++i) check_case(cases[i], seed + static_cast<uint32_t>(i));
}

// The features of today's models (model/attention.h): QK norm and the rope
// variants before the cache, softcap and sinks in the attention over it, on
// prompts, single steps and multi-row appends, every cache dtype.
// QK norm with random weights in [-0.5, 1.5] (gemma: Gemma's 1 + w form).
std::function<void(AttentionSpec&, std::mt19937&)> random_qk_norm(bool gemma) {
  return [gemma](AttentionSpec& s, std::mt19937& g) {
    s.qk_norm = QkNorm{rand_tensor(g, {s.head_dim}, -0.5f, 1.5f), rand_tensor(g, {s.head_dim}, -0.5f, 1.5f), 1e-6, gemma};
  };
}

TEST(Decode, QkNormSoftcapSinksAndRopeVariants) {
  const uint32_t seed = test::test_seed(2);
  const auto norm = random_qk_norm;
  auto softcap = [](AttentionSpec& s, std::mt19937&) { s.softcap = 0.7; };
  auto sinks = [](AttentionSpec& s, std::mt19937& g) { s.sinks = rand_tensor(g, {s.num_heads}, -3.0f, 3.0f); };
  auto rope = [](RotaryEmbedding r) { return [r](AttentionSpec& s, std::mt19937&) { s.rope = r; }; };
  RotaryEmbedding partial{10000.0, 16}, yarn{150000.0, 0, true, RopeScaling::Yarn, 32.0}, llama3{500000.0};
  yarn.original_max_positions = 8, yarn.attention_factor = 1.3466;
  llama3.scaling = RopeScaling::Llama3, llama3.factor = 8.0, llama3.original_max_positions = 16;
  std::vector<DCase> cases;
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.rope = true; c.features = norm(false); }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.rope = true; c.chunks = {1, 2, 1}; c.features = norm(true); }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.H = 8; c.features = softcap; }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.rope = true; c.window = 4; c.chunks = {3, 1}; c.features = sinks; }));
  cases.push_back(with([&](DCase& c) {
    c.dh = 32; c.P = 300; c.T = 3; c.features = [&](AttentionSpec& s, std::mt19937& g) { softcap(s, g), sinks(s, g); };
  }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.features = rope(partial); }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.T = 12; c.features = rope(yarn); }));
  cases.push_back(with([&](DCase& c) { c.dh = 32; c.T = 20; c.features = rope(llama3); }));
  for (std::size_t i = 0; i < cases.size(); ++i) check_case(cases[i], seed + static_cast<uint32_t>(i));
}

// The bounds over many seeds of QK-norm'd models. Normalised queries and
// keys make the scores large, so most of the error comes through them, and
// there the cpu's rounded query adds to the key's rounding (seed 3651541198
// of the first case above took the cpu's q8_0 decode to 4.85u, past the 4u
// that counts the key alone). The first seed is that one; the others are
// drawn from the test's seed (MHA_TEST_SEED=random draws new ones).
TEST(Decode, QkNormBoundsOverRandomSeeds) {
  std::mt19937 draw(test::test_seed(3));
  for (int i = 0; i < 24; ++i) {
    const uint32_t seed = i == 0 ? 3651541198u : static_cast<uint32_t>(draw());
    SCOPED_TRACE("seed " + std::to_string(seed));
    check_case(with([&](DCase& c) {
                 c.dh = 32, c.rope = true, c.features = random_qk_norm(i % 2 == 1);
                 if (i % 3 == 1) c.H = 8, c.Hkv = 1;                     // MQA
                 if (i % 3 == 2) c.chunks = {1, 2, 1};                    // multi-row appends
               }),
               seed);
  }
}

// The query as the integer score path reads it, written out here from
// ggml's quantize_row_q8_0_ref: per block of `block` elements (32 for the
// q8_0 and q4_0 caches, 16 for bfloat8_b and bfloat4_b), d = max|x| / 127,
// codes round(x / d) (half away from zero), the scale stored as fp16; the
// values are code * fp16(d). Each product of a code with a cached key
// element (code * fp16 scale, or code * 2^e) is exact in float64, so a
// float64 dot of these values with the decoded keys is the integer sums
// times the two scales.
std::vector<float> q8_0_values(const std::vector<float>& x, size_t block = 32) {
  std::vector<float> y(x.size());
  for (size_t b = 0; b < x.size(); b += block) {
    float amax = 0;
    for (size_t e = b; e < b + block; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0, ds = f32_from_f16(f16_from_f32(d));
    for (size_t e = b; e < b + block; ++e) y[e] = std::round(x[e] * id) * ds;
  }
  return y;
}

// Every instance of the chunk kernel this CPU runs (AVX2; AVX-512, and with
// VNNI, where it has them) against float64 sums over the cache's decoded
// values (kv_rows_to_f32), the scores of the block formats with the query
// quantized to q8_0 blocks (q8_0_values), every cache format: odd widths for the
// one-element formats (vector tails), whole blocks for the others (dh 96:
// three 32-blocks, so AVX-512's two-block integer units end on a half unit). The V widths take
// every path of the P.V pass on both ISAs: a wide strip (4 vectors on
// AVX-512, 2 on AVX2, spanning units), single vectors after it, and (93) a
// scalar tail.
TEST(Decode, ChunkKernelsMatchFloat64) {
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::vector<cpu::DecodeKernel> kernels = cpu::decode_kernels();
  const float scale_log2 = 0.3f * 1.4426950408889634f;
  // G 8: the batched score path (four heads x a few keys, 65 keys leave a
  // tail); G 6: the per-key path and the leftover heads.
  for (int64_t G : {8, 6})
  for (CacheDtype dt : kAllCacheDtypes) {
    SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " G " + std::to_string(G));
    const bool blocks = cache_dtype_block(dt) > 1;
    const int64_t dh = blocks ? 96 : 37, dv = blocks ? 96 : 93, j0 = 5, j1 = 70, rows = 80;
    std::vector<float> q(G * dh), k(rows * dh), v(rows * dv);
    for (auto* vec : {&q, &k, &v})
      for (float& e : *vec) e = u(g);
    const int64_t kb = kv_row_bytes(dt, dh), vb = kv_row_bytes(dt, dv);
    const std::vector<unsigned char> kc = test::encode_rows(dt, k, rows, dh), vc = test::encode_rows(dt, v, rows, dv);
    kv_rows_to_f32(dt, kc.data(), rows, dh, k.data(), dh);  // what the kernel must read
    kv_rows_to_f32(dt, vc.data(), rows, dv, v.data(), dv);
    // the query the scores see (every block format's are integer dot products)
    const std::vector<float> qs = blocks ? q8_0_values(q, static_cast<size_t>(cache_dtype_block(dt))) : q;
    for (cpu::DecodeKernel kern : kernels) {
      SCOPED_TRACE(cpu::decode_kernel_isa(kern));
      std::vector<float> s(G * (j1 - j0)), o(G * dv), m(G), l(G);
      cpu::DecodeChunk c;
      c.q = q.data(), c.k = kc.data(), c.v = vc.data(), c.dt = dt, c.kbytes = kb, c.vbytes = vb;
      c.j0 = j0, c.j1 = j1, c.G = G, c.dh = dh, c.dv = dv, c.scale_log2 = scale_log2;
      c.s = s.data(), c.o = o.data(), c.m = m.data(), c.l = l.data();
      kern(c);
      for (int64_t h = 0; h < G; ++h) {
        std::vector<double> sc;
        for (int64_t j = j0; j < j1; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < dh; ++d) acc += double(qs[h * dh + d]) * k[j * dh + d];
          sc.push_back(acc * scale_log2);
        }
        const double M = *std::max_element(sc.begin(), sc.end());
        EXPECT_NEAR(m[h], M, 1e-5);
        double L = 0;
        std::vector<double> ov(dv, 0.0);
        for (int64_t j = j0; j < j1; ++j) {
          const double p = std::exp2(sc[j - j0] - m[h]);
          L += p;
          for (int64_t d = 0; d < dv; ++d) ov[d] += p * v[j * dv + d];
        }
        EXPECT_NEAR(l[h], L, 1e-5 * L);
        for (int64_t d = 0; d < dv; ++d) EXPECT_NEAR(o[h * dv + d], ov[d], 1e-5 * L);
      }
    }
  }
}

// A one-token step's projections are matrix-vector products cut into
// per-thread row blocks (cpu_decode.cpp gemv): each block is its own
// OpenBLAS call, so an element's bits must not depend on where the blocks
// fall. 1040 features: 3120 q/k/v rows and 1040 output rows split in 4 to
// 20 blocks (a 16-row remainder in some splits, none in others); the cache
// stays below one key chunk, so only the projections see the thread count.
TEST(Decode, CpuStepBitsDoNotDependOnThreadCount) {
  DCase c;
  c.P = 3, c.T = 3, c.H = 8, c.Hkv = 8, c.dh = 130, c.E = 1040, c.bias = true;
  std::mt19937 g(11);
  const AttentionSpec spec = make_spec(c, g);
  const Tensor x = rand_tensor(g, {c.B, c.P + c.T, c.E}, -2, 2);
  std::vector<double> first;
  for (int threads : {1, 2, 3, 5}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    auto cpu = make_cpu_backend({{"threads", threads}}, "backend");
    const std::vector<double> y = decode(*cpu, spec, c, x, CacheDtype::Float32).to_f64();
    if (first.empty()) first = y;
    ASSERT_EQ(y.size(), first.size());
    EXPECT_EQ(std::memcmp(y.data(), first.data(), sizeof(double) * y.size()), 0);
  }
}

TEST(Decode, UnsupportedSpecsGiveOneLine) {
  std::mt19937 g(3);
  DCase c;
  AttentionSpec s = make_spec(c, g);
  auto ref = make_reference_backend();
  auto cpu = make_cpu_backend({{"threads", 2}}, "backend");
  auto tts = make_backend("tt-sim", nlohmann::ordered_json::object(), "backend");
  EXPECT_FALSE(ref->supports_decode(s));
  EXPECT_FALSE(cpu->supports_decode(s));
  ASSERT_TRUE(tts->supports_decode(s));
  DecodeOptions o;
  o.max_tokens = 4;
  EXPECT_THROW(tts->start_decode(s, o), InputError);

  AttentionSpec nc = s;
  nc.causal = false;
  for (Backend* be : {ref.get(), cpu.get()}) {
    auto why = be->supports_decode(nc);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("causal"), std::string::npos) << *why;
    EXPECT_EQ(why->find('\n'), std::string::npos);
    EXPECT_THROW(be->start_decode(nc, o), InputError);
  }
  AttentionSpec bk = s;
  bk.bias_k = rand_tensor(g, {c.Hkv * c.dh}, -1, 1);
  bk.bias_v = rand_tensor(g, {c.Hkv * c.dh}, -1, 1);
  EXPECT_TRUE(cpu->supports_decode(bk));
  AttentionSpec zero = s;
  zero.add_zero_attn = true;
  EXPECT_TRUE(ref->supports_decode(zero));
}

TEST(Decode, AppendChecksShapeAndCapacity) {
  std::mt19937 g(4);
  DCase c;
  const AttentionSpec s = make_spec(c, g);
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(make_reference_backend());
  backends.push_back(make_cpu_backend({{"threads", 2}}, "backend"));
  for (auto& be : backends) {
    DecodeOptions o;
    o.max_tokens = 3;
    auto sess = be->start_decode(s, o);
    EXPECT_THROW(sess->append(rand_tensor(g, {1, 2, c.E + 1}, -1, 1)), InputError);
    EXPECT_THROW(sess->append(rand_tensor(g, {2, 2, c.E}, -1, 1)), InputError);
    EXPECT_THROW(sess->append(rand_tensor(g, {1, 4, c.E}, -1, 1)), InputError);
    sess->append(rand_tensor(g, {1, 2, c.E}, -1, 1));
    EXPECT_THROW(sess->append(rand_tensor(g, {1, 2, c.E}, -1, 1)), InputError);  // 2 + 2 > 3
    EXPECT_EQ(sess->length(), 2);
    o.max_tokens = 0;
    EXPECT_THROW(be->start_decode(s, o), InputError);
  }
}

}  // namespace
}  // namespace mha

namespace mha {
namespace {

// fill_synthetic writes the same values on both backends: appends after it
// agree as ordinary decodes do (float32 tolerances; bfloat16 rounds the
// same float32 values identically).
TEST(Decode, SyntheticContextAgreesAcrossBackends) {
  std::mt19937 g(9);
  DCase c;
  c.H = 8, c.Hkv = 2, c.dh = 16, c.E = 32, c.rope = true, c.window = 300;
  const AttentionSpec s = make_spec(c, g);
  const Tensor x = rand_tensor(g, {1, 5, c.E}, -2, 2);
  for (CacheDtype dt : {CacheDtype::Float32, CacheDtype::Bfloat16}) {
    std::vector<Tensor> outs;
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(make_reference_backend());
    backends.push_back(make_cpu_backend({{"threads", 2}}, "backend"));
    for (auto& be : backends) {
      DecodeOptions o;
      o.cache_dtype = dt, o.max_tokens = 600 + 5;
      auto sess = be->start_decode(s, o);
      sess->fill_synthetic(600, 42);
      EXPECT_EQ(sess->length(), 600);
      EXPECT_THROW(sess->fill_synthetic(6, 1), InputError);
      Tensor a = sess->append(token_rows(x, 0, 2)), b = sess->append(token_rows(x, 2, 1));
      EXPECT_EQ(sess->length(), 603);
      outs.push_back(a), outs.push_back(b);
    }
    EXPECT_TRUE(test::tensors_close(outs[2], outs[0], 1e-5, 1.3e-6));
    EXPECT_TRUE(test::tensors_close(outs[3], outs[1], 1e-5, 1.3e-6));
  }
}

}  // namespace
}  // namespace mha
