// MLA's absorbed attention over a bfloat16 latent cache (latent_attention,
// cpu_decode_prefill.h), whichever kernel this CPU runs it on (AMX's tiles
// with split-bfloat16 operands, cpu_mla_amx.h, or the flash kernel), against
// float64 on the same bfloat16 rows, within a priori float32 bounds (u =
// 2^-24, per head h and value column):
//   score j: |ds_j| <= (n_j + 2) u c1 sum_d |q_hd k_jd|, n_j the nonzero
//     products (a dot product of n terms rounds at most n - 1 times, then the
//     scale and the max's subtraction), so a dropped split piece (2^-16 of a
//     query element) shows;
//   weights: relative <= E = ln 2 * max_j |ds_j| + 16 u (exp2's fit and
//     rounding), the sum of S of them S u more;
//   output: |do| <= (2 E + (2 S + 2) u) max_j |v_j|.
// Shapes: several key blocks and a partial one, heads not a multiple of any
// tile, 1 to 3 threads, a sliding window's first key, a batch of 2 rows
// appended at once, rows of more keys than one chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_decode_prefill.h"
#include "backends/cpu/kv_format.h"

namespace mha {
namespace {

struct LCase {
  int64_t B = 1, H = 40, n = 1, len = 150, dh = 96, dv = 64, window = 0;
  int threads = 1;
  // Each head's query is +A, -A - a (A ~ 1000, a < 1) on one pair of columns whose
  // cached elements differ by a bfloat16 step or two: scores of order 1
  // from cancelling products of order 1000, the case float32 rounds finely
  // (the bound is ~2^-11) and a query kept to 16 bits would not (~2^-7).
  bool paired = false;
};

std::vector<float> check(const LCase& c, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed) + " H " + std::to_string(c.H) + " len " + std::to_string(c.len) +
               " threads " + std::to_string(c.threads) + (c.paired ? " paired" : ""));
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t T = c.len + c.n, row = kv_row_bytes(CacheDtype::Bfloat16, c.dh);
  std::vector<unsigned char> cache(c.B * T * row);
  std::vector<float> x(c.dh), rows(c.B * T * c.dh);  // rows: the cache's values, widened
  std::uniform_int_distribution<int> step(-2, 2);
  for (int64_t r = 0; r < c.B * T; ++r) {
    for (float& e : x) e = nd(g);
    if (c.paired)
      for (int64_t d = 0; d < c.dh; d += 2) {
        kv_round_row(CacheDtype::Bfloat16, &x[d], 1);
        x[d + 1] = x[d] * (1.0f + std::ldexp(static_cast<float>(step(g)), -8));
      }
    kv_encode_row(CacheDtype::Bfloat16, x.data(), c.dh, cache.data() + r * row);
    kv_row_to_f32_scalar(CacheDtype::Bfloat16, cache.data() + r * row, c.dh, rows.data() + r * c.dh);
  }
  const int64_t Q = c.B * c.n * c.H;
  std::vector<float> qa(Q * c.dh, 0.0f), ctx(Q * c.dv, NAN);
  for (int64_t i = 0; i < Q; ++i)
    if (c.paired) {
      const int64_t d = (i * 2) % c.dh;
      qa[i * c.dh + d] = 1000.0f * (0.5f + 0.5f * std::fabs(std::erf(nd(g))));
      qa[i * c.dh + d + 1] = -(qa[i * c.dh + d] + std::fabs(std::erf(nd(g))));  // other low bits
    } else
      for (int64_t d = 0; d < c.dh; ++d) qa[i * c.dh + d] = nd(g) * 0.3f;
  cpu::LatentArgs a;
  a.cache.dtype = CacheDtype::Bfloat16, a.cache.k = a.cache.v = cache.data(), a.cache.vbytes = row;
  a.cache.Hkv = 1, a.cache.T = T, a.cache.dh = c.dh, a.cache.dv = c.dv;
  a.rule.causal = true, a.rule.window = c.window;
  a.scale = 0.7f, a.B = c.B, a.H = c.H, a.n = c.n, a.len = c.len;
  a.qa = qa.data(), a.ctx = ctx.data();
  cpu::ThreadPool pool(c.threads);
  std::vector<cpu::FlashScratch> scratch;
  cpu::latent_attention(pool, a, scratch);

  const double u = std::ldexp(1.0, -24), c1 = static_cast<double>(a.scale * cpu::kLog2e);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t h = 0; h < c.H; ++h) {
        const int64_t i = (b * c.n + r) * c.H + h, j0 = a.rule.first_key(c.len + r), S = c.len + r + 1 - j0;
        const float* q = qa.data() + i * c.dh;
        std::vector<double> s(S);
        double ds = 0, vmax = 0, m = -INFINITY, l = 0;
        for (int64_t j = 0; j < S; ++j) {
          const float* k = rows.data() + (b * T + j0 + j) * c.dh;
          double dot = 0, mag = 0;
          int64_t nz = 0;
          for (int64_t d = 0; d < c.dh; ++d) {
            dot += static_cast<double>(q[d]) * k[d], mag += std::fabs(static_cast<double>(q[d]) * k[d]);
            nz += q[d] * k[d] != 0;
          }
          s[j] = c1 * dot, m = std::max(m, s[j]);
          ds = std::max(ds, (nz + 2) * u * c1 * mag);
          for (int64_t e = 0; e < c.dv; ++e) vmax = std::max(vmax, std::fabs(static_cast<double>(k[e])));
        }
        for (double& e : s) l += (e = std::exp2(e - m));
        const double bound = (2 * (std::log(2.0) * ds + 16 * u) + (2 * S + 2) * u) * vmax;
        for (int64_t e = 0; e < c.dv; ++e) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j) o += s[j] * rows[(b * T + j0 + j) * c.dh + e];
          EXPECT_NEAR(ctx[i * c.dv + e], o / l, bound) << "row " << i << " column " << e;
        }
      }
  return ctx;
}

TEST(LatentAttention, Bfloat16CacheWithinFloat32BoundsOfFloat64) {
  check({}, 11);
  LCase two;  // two threads, heads across tiles
  two.threads = 2, two.H = 70, two.len = 200;
  check(two, 12);
  LCase batch;  // two batch rows, three rows appended at once, a window
  batch.B = 2, batch.n = 3, batch.H = 16, batch.len = 129, batch.window = 100, batch.dh = 64, batch.dv = 32;
  check(batch, 13);
}

// Past 8192 visible keys the AMX path cuts them into chunks whose softmax
// states it merges; the cut depends on the key count only, so the bits do
// not depend on the thread count (docs/CONFIG.md, `threads`).
TEST(LatentAttention, LongRowsAreTheSameForAnyThreadCount) {
  LCase c;
  c.H = 20, c.dh = 64, c.dv = 32, c.len = 17000, c.n = 2;
  const std::vector<float> one = check(c, 31);
  c.threads = 3;
  EXPECT_EQ(check(c, 31), one);
}

TEST(LatentAttention, SplitQueriesKeepFloat32Scores) {
  LCase c;
  c.paired = true, c.len = 70, c.H = 33;
  check(c, 21);
  c.threads = 2, c.len = 300;
  check(c, 22);
}

}  // namespace
}  // namespace mha
