// Prefill at depth (cpu_decode_prefill.h): appending P rows to a cache of d
// runs the flash kernel over the P x (d + P) block, reading keys and values
// from the cache through cache_rows_to_f32.
//
// Kernel level, on every ISA the CPU runs: the at-depth rows equal rows
// [d, d + P) of the one-shot causal run over d + P tokens. Bit for bit when
// d is a multiple of the query block kBr and there is no window (every task
// then sees the same queries, the same key blocks and the same cuts); else
// within 4e-5 * (1 + |x|): both are float32 flash evaluations of the same
// softmax that differ only in where query blocks start, and so in which key
// blocks are masked per lane and which running max each exponent is taken
// against. Each is within 2e-5 * (1 + |exact|) of float64 (the flash kernel
// tests' bound), which is checked too; the two therefore agree within twice
// that. A bfloat16 cache is compared with the one-shot run on the same
// bfloat16-rounded keys and values, under the same bounds.
//
// Session level: a cpu decode session fed a prompt and then chunks of
// several rows (offsets not multiples of any tile, GQA, windows, batch 2,
// rope, both ISAs through the backend's "kernels" option) equals the
// reference backend's one causal run within torch.testing's float32
// tolerances, as the cpu run() does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_decode_prefill.h"
#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_flash_kernel.h"
#include "backends/cpu/kv_format.h"
#include "backends/reference/reference_backend.h"
#include "support/test_support.h"
#include "tensor/half.h"
#include "util/error.h"

namespace mha {
namespace {

struct PCase {
  int64_t B, d, P, H, Hkv, dh, dv, window;
};

std::vector<vec::Isa> isas() {
  std::vector<vec::Isa> v{vec::Isa::Avx2};
  if (cpu::flash_isa_available(vec::Isa::Avx512)) v.push_back(vec::Isa::Avx512);
  return v;
}

// softmax(q k^T * scale) v in float64 for query rows at positions [d, d+P)
// of batch b, head h, under the causal / window rule.
double exact(const PCase& c, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
             const MaskRule& rule, float scale, int64_t b, int64_t i, int64_t h, int64_t e) {
  const int64_t L = c.d + c.P, g = h / (c.H / c.Hkv);
  std::vector<double> s(L, -INFINITY);
  double mx = -INFINITY;
  for (int64_t j = 0; j < L; ++j) {
    if (!rule.visible(i, j)) continue;
    double acc = 0;
    for (int64_t t = 0; t < c.dh; ++t)
      acc += double(q[(b * L + i) * c.H * c.dh + h * c.dh + t]) * k[(b * L + j) * c.Hkv * c.dh + g * c.dh + t];
    s[j] = acc * scale;
    mx = std::max(mx, s[j]);
  }
  double sum = 0, out = 0;
  for (int64_t j = 0; j < L; ++j)
    if (s[j] != -INFINITY) {
      const double w = std::exp(s[j] - mx);
      sum += w;
      out += w * v[(b * L + j) * c.Hkv * c.dv + g * c.dv + e];
    }
  return out / sum;
}

void check_kernel_case(const PCase& c, CacheDtype dt, std::mt19937& gen) {
  SCOPED_TRACE("B " + std::to_string(c.B) + " d " + std::to_string(c.d) + " P " + std::to_string(c.P) + " H " +
               std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " dh " + std::to_string(c.dh) + " dv " +
               std::to_string(c.dv) + " window " + std::to_string(c.window) + " " + cache_dtype_name(dt));
  const int64_t L = c.d + c.P, T = L + 5;  // T > L: the planes have unused rows past the session's length
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](int64_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = nd(gen);
    return x;
  };
  const bool bf = dt == CacheDtype::Bfloat16;
  std::vector<float> q = fill(c.B * L * c.H * c.dh), k = fill(c.B * L * c.Hkv * c.dh), v = fill(c.B * L * c.Hkv * c.dv);
  if (bf)
    for (auto* x : {&k, &v})
      for (float& e : *x) e = round_bf16(e);
  // The cache [B, Hkv, T, d] in dt.
  const int64_t es = bf ? 2 : 4;
  std::vector<unsigned char> kc(c.B * c.Hkv * T * c.dh * es, 0xff), vc(c.B * c.Hkv * T * c.dv * es, 0xff);
  auto put = [&](std::vector<unsigned char>& cache, const std::vector<float>& src, int64_t d) {
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t g = 0; g < c.Hkv; ++g)
        for (int64_t j = 0; j < L; ++j)
          for (int64_t t = 0; t < d; ++t) {
            const float x = src[(b * L + j) * c.Hkv * d + g * d + t];
            const int64_t i = ((b * c.Hkv + g) * T + j) * d + t;
            if (bf) {
              const uint16_t h = bf16_from_f32(x);
              std::memcpy(cache.data() + i * 2, &h, 2);
            } else {
              std::memcpy(cache.data() + i * 4, &x, 4);
            }
          }
  };
  put(kc, k, c.dh);
  put(vc, v, c.dv);
  MaskRule rule;
  rule.causal = true, rule.window = c.window;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dh));

  for (vec::Isa isa : isas()) {
    SCOPED_TRACE(cpu::flash_kernel_isa(isa));
    // One shot over all L rows, keys and values in the projections' layout.
    cpu::FlashArgs a;
    a.B = c.B, a.L = L, a.S = a.St = L, a.H = c.H, a.Hkv = c.Hkv, a.dh = c.dh, a.dv = c.dv;
    a.q = q.data(), a.k = k.data(), a.v = v.data();
    a.ldq = c.H * c.dh, a.ldk = c.Hkv * c.dh, a.ldv = c.Hkv * c.dv;
    a.scale = scale, a.rule = rule, a.isa = isa;
    std::vector<float> one(c.B * L * c.H * c.dv);
    a.ctx = one.data(), a.ldc = c.H * c.dv;
    cpu::FlashScratch s;
    s.resize(c.dh, c.dv);
    const int64_t sets = cpu::flash_head_sets(c.H, c.Hkv);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t hs = 0; hs < sets; ++hs)
        for (int64_t qb = 0; qb < cpu::flash_query_blocks(L); ++qb) cpu::flash_block(a, b, hs, qb, s);

    // At depth: the P new query rows of each batch, keys from the cache.
    std::vector<float> qn(c.B * c.P * c.H * c.dh), deep(c.B * c.P * c.H * c.dv, -7.0f);
    for (int64_t b = 0; b < c.B; ++b)
      std::memcpy(qn.data() + b * c.P * c.H * c.dh, q.data() + (b * L + c.d) * c.H * c.dh,
                  sizeof(float) * c.P * c.H * c.dh);
    cpu::PrefillArgs p;
    p.cache.dtype = dt, p.cache.k = kc.data(), p.cache.v = vc.data();
    p.cache.Hkv = c.Hkv, p.cache.T = T, p.cache.dh = c.dh, p.cache.dv = c.dv;
    p.rule = rule, p.scale = scale, p.B = c.B, p.H = c.H, p.n = c.P, p.len = c.d;
    p.q = qn.data(), p.ldq = c.H * c.dh, p.ctx = deep.data(), p.ldc = c.H * c.dv, p.isa = isa;
    ThreadPool pool(2);
    std::vector<cpu::FlashScratch> scratch;
    cpu::prefill_attention(pool, p, scratch);

    const bool aligned = c.d % cpu::kBr == 0 && c.window == 0;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.P; ++i)
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t e = 0; e < c.dv; ++e) {
            const float x = deep[((b * c.P + i) * c.H + h) * c.dv + e];
            const float y = one[((b * L + c.d + i) * c.H + h) * c.dv + e];
            if (aligned)
              ASSERT_EQ(x, y) << "b " << b << " row " << i << " head " << h << " col " << e;
            else
              ASSERT_NEAR(x, y, 4e-5 * (1.0 + std::fabs(y))) << "b " << b << " row " << i << " head " << h;
            // Spot-check against float64 (a few columns per row).
            if (e % 7 == 0) {
              const double w = exact(c, q, k, v, rule, scale, b, c.d + i, h, e);
              ASSERT_NEAR(x, w, 2e-5 * (1.0 + std::fabs(w))) << "b " << b << " row " << i << " head " << h;
            }
          }
  }
}

TEST(DecodePrefill, AtDepthEqualsTheOneShotRunOnEveryIsa) {
  const std::vector<PCase> cases = {
      // B, d, P, H, Hkv, dh, dv, window
      {1, 96, 150, 8, 2, 32, 32, 0},    // depth one query block: bitwise
      {2, 192, 40, 4, 1, 16, 16, 0},    // batch 2, MQA, bitwise
      {1, 100, 130, 8, 2, 32, 32, 0},   // offset not a tile multiple (6, 12, 16, 32, 96)
      {2, 37, 61, 6, 1, 40, 24, 0},     // two head sets (4 + 2), dv != dh, odd offsets
      {1, 250, 70, 4, 4, 17, 9, 0},     // MHA, odd head dims, depth > P
      {1, 131, 100, 8, 2, 16, 16, 45},  // window shorter than the depth: leading key blocks skipped
      {2, 50, 97, 4, 2, 24, 24, 64},    // window, batch 2
  };
  std::mt19937 g(2104);
  for (const PCase& c : cases) check_kernel_case(c, CacheDtype::Float32, g);
  for (const PCase& c : {cases[0], cases[3], cases[5]}) check_kernel_case(c, CacheDtype::Bfloat16, g);
}

// The row source hands the flash kernel the cache's rows of one (batch, kv
// head) plane as kv_rows_to_f32 widens them, padding columns zero, in every
// cache format.
TEST(DecodePrefill, CacheRowsWidenExactly) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t B = 2, Hkv = 2, T = 5, d = 32, ld = 40, j0 = 1, n = 3;
  for (CacheDtype dt : kAllCacheDtypes) {
    SCOPED_TRACE(cache_dtype_name(dt));
    const int64_t row = kv_row_bytes(dt, d);
    std::vector<unsigned char> k(B * Hkv * T * row), v(k.size());
    std::vector<float> x(d);
    for (int64_t r = 0; r < B * Hkv * T; ++r) {
      for (float& e : x) e = nd(g);
      kv_encode_row(dt, x.data(), d, k.data() + r * row);
      for (float& e : x) e = nd(g);
      kv_encode_row(dt, x.data(), d, v.data() + r * row);
    }
    cpu::CacheView view;
    view.dtype = dt, view.k = k.data(), view.v = v.data(), view.Hkv = Hkv, view.T = T, view.dh = d, view.dv = d;
    const cpu::FlashRowSource src = cpu::cache_row_source(view);
    for (bool value : {false, true}) {
      std::vector<float> out(n * ld, -1.0f), want(n * d);
      src.load(src.self, value, 1, 1, j0, n, out.data(), ld);
      kv_rows_to_f32(dt, (value ? v : k).data() + ((1 * Hkv + 1) * T + j0) * row, n, d, want.data(), d);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t e = 0; e < ld; ++e) EXPECT_EQ(out[j * ld + e], e < d ? want[j * d + e] : 0.0f);
    }
  }
}

struct SCase {
  int64_t B, H, Hkv, dh, E, window;
  bool rope;
  std::vector<int64_t> appends;  // the prompt, then chunks (1: a decode step)
};

// The session's appends, concatenated, against the reference's one causal
// run over all rows.
void check_session(const SCase& c, const std::string& kernels, uint32_t seed) {
  std::string sizes;
  for (int64_t n : c.appends) sizes += std::to_string(n) + " ";
  SCOPED_TRACE("appends " + sizes + "H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " window " +
               std::to_string(c.window) + " kernels " + kernels);
  std::mt19937 g(seed);
  AttentionSpec s;
  s.variant = "test";
  s.num_heads = c.H, s.num_kv_heads = c.Hkv, s.head_dim = s.head_dim_v = c.dh;
  s.q = test::rand_proj(g, c.H * c.dh, c.E, true);
  s.k = test::rand_proj(g, c.Hkv * c.dh, c.E, true);
  s.v = test::rand_proj(g, c.Hkv * c.dh, c.E, true);
  s.out = test::rand_proj(g, c.E, c.H * c.dh, false);
  s.scale = 1.0 / std::sqrt(static_cast<double>(c.dh));
  s.causal = true, s.window = c.window;
  if (c.rope) s.rope = RotaryEmbedding{10000.0};
  int64_t L = 0;
  for (int64_t n : c.appends) L += n;
  const Tensor x = test::rand_tensor(g, {c.B, L, c.E}, -2, 2);
  AttentionInputs in;
  in.query = in.key = in.value = x;
  const Tensor full = make_reference_backend()->run(s, in, {}).output;

  auto cpu = make_cpu_backend({{"threads", 2}, {"kernels", kernels}}, "backend");
  if (kernels == "avx2") {
    EXPECT_EQ(cpu->describe()["flash_simd"], "avx2");
    EXPECT_EQ(cpu->describe()["decode_simd"], "avx2");
  }
  DecodeOptions o;
  o.batch = c.B, o.max_tokens = L + 3;
  auto sess = cpu->start_decode(s, o);
  std::vector<double> all(c.B * L * c.E);
  int64_t r0 = 0;
  for (int64_t n : c.appends) {
    std::vector<float> rows(c.B * n * c.E);
    for (int64_t b = 0; b < c.B; ++b)
      std::memcpy(rows.data() + b * n * c.E, x.data<float>() + (b * L + r0) * c.E, sizeof(float) * n * c.E);
    const std::vector<double> y = sess->append(Tensor::from_f32({c.B, n, c.E}, std::move(rows))).to_f64();
    for (int64_t b = 0; b < c.B; ++b)
      std::copy(y.begin() + b * n * c.E, y.begin() + (b + 1) * n * c.E, all.begin() + (b * L + r0) * c.E);
    r0 += n;
  }
  EXPECT_TRUE(test::tensors_close(Tensor::from_f64({c.B, L, c.E}, all), full, 1e-5, 1.3e-6));
}

TEST(DecodePrefill, SessionChunksMatchOneCausalRun) {
  const std::vector<SCase> cases = {
      {1, 8, 2, 16, 32, 0, true, {100, 130, 1, 97}},  // chunks at offsets 100 and 231: no tile multiple
      {2, 4, 1, 8, 24, 0, false, {5, 200, 2, 1, 13}},  // batch 2, MQA, a long chunk after a short prompt
      {1, 6, 3, 8, 24, 40, true, {70, 65, 1, 50}},     // window shorter than the depth
      {2, 4, 4, 12, 20, 0, true, {1, 1, 90, 7}},       // steps first, then chunks
  };
  uint32_t seed = 77;
  for (const SCase& c : cases) {
    check_session(c, "auto", seed);
    check_session(c, "avx2", seed++);
  }
}

TEST(DecodePrefill, KernelsOptionIsChecked) {
  try {
    make_cpu_backend({{"kernels", "sse"}}, "backend");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "backend.kernels: expected \"auto\", \"avx512\" or \"avx2\", found \"sse\"");
  }
  if (!cpu::flash_isa_available(vec::Isa::Avx512)) {
    EXPECT_THROW(make_cpu_backend({{"kernels", "avx512"}}, "backend"), InputError);
  } else {
    EXPECT_EQ(make_cpu_backend({{"kernels", "avx512"}}, "backend")->describe()["flash_simd"], "avx512");
  }
}

}  // namespace
}  // namespace mha
