// The cpu flash kernels called directly, each ISA instance the CPU runs
// (AVX2 always, AVX-512 where present), against a float64 attention written
// here from the definition: grouped-query head sets (whole and partial),
// causal / window / additive masks, bias and zero key rows, dv != dh, odd
// head dims, and lengths that leave partial query and key blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_flash_kernel.h"

namespace mha {
namespace {

struct FlashCase {
  int64_t B, L, S, H, Hkv, dh, dv;
  bool causal;
  int64_t window;
  bool mask, bias_kv, zero_key;
  int64_t mask_h = 1;  // 1: broadcast over heads
};

struct Data {
  std::vector<float> q, k, v, bk, bv, mask;
};

Data make_data(const FlashCase& c, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](int64_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = nd(g);
    return x;
  };
  Data d;
  d.q = fill(c.B * c.L * c.H * c.dh);
  d.k = fill(c.B * c.S * c.Hkv * c.dh);
  d.v = fill(c.B * c.S * c.Hkv * c.dv);
  if (c.bias_kv) d.bk = fill(c.Hkv * c.dh), d.bv = fill(c.Hkv * c.dv);
  const int64_t St = c.S + c.bias_kv + c.zero_key;
  if (c.mask) {
    d.mask = fill(c.B * c.mask_h * c.L * St);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (float& e : d.mask)
      if (u(g) < 0.2f) e = -std::numeric_limits<float>::infinity();
  }
  return d;
}

cpu::FlashArgs make_args(const FlashCase& c, const Data& d, std::vector<float>& ctx) {
  cpu::FlashArgs a;
  a.B = c.B, a.L = c.L, a.S = c.S, a.St = c.S + c.bias_kv + c.zero_key;
  a.H = c.H, a.Hkv = c.Hkv, a.dh = c.dh, a.dv = c.dv;
  a.q = d.q.data(), a.k = d.k.data(), a.v = d.v.data();
  a.ldq = c.H * c.dh, a.ldk = c.Hkv * c.dh, a.ldv = c.Hkv * c.dv;
  a.bias_k = c.bias_kv ? d.bk.data() : nullptr;
  a.bias_v = c.bias_kv ? d.bv.data() : nullptr;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.dh));
  a.rule.causal = c.causal, a.rule.window = c.window;
  if (c.mask) a.mask = d.mask.data(), a.mask_b = c.B, a.mask_h = c.mask_h, a.mask_l = c.L;
  ctx.assign(c.B * c.L * c.H * c.dv, -7.0f);
  a.ctx = ctx.data(), a.ldc = c.H * c.dv;
  return a;
}

// softmax(q k^T * scale + mask) v per (b, h, i) in float64; key row S is
// the bias row when there is one, rows past it zero; NaN where every key
// is masked, as torch gives.
std::vector<double> reference(const FlashCase& c, const Data& d, const cpu::FlashArgs& a) {
  std::vector<double> out(c.B * c.L * c.H * c.dv);
  const int64_t G = c.H / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        const int64_t g = h / G;
        std::vector<double> s(a.St, -INFINITY);
        auto krow = [&](int64_t j, int64_t e) -> double {
          if (j < c.S) return d.k[(b * c.S + j) * a.ldk + g * c.dh + e];
          return j == c.S && c.bias_kv ? d.bk[g * c.dh + e] : 0.0;
        };
        auto vrow = [&](int64_t j, int64_t e) -> double {
          if (j < c.S) return d.v[(b * c.S + j) * a.ldv + g * c.dv + e];
          return j == c.S && c.bias_kv ? d.bv[g * c.dv + e] : 0.0;
        };
        double mx = -INFINITY;
        for (int64_t j = 0; j < a.St; ++j) {
          if (!a.rule.visible(i, j)) continue;
          double acc = 0;
          for (int64_t e = 0; e < c.dh; ++e) acc += double(d.q[(b * c.L + i) * a.ldq + h * c.dh + e]) * krow(j, e);
          acc *= a.scale;
          if (c.mask) acc += d.mask[((b * c.mask_h + (c.mask_h == 1 ? 0 : h)) * c.L + i) * a.St + j];
          s[j] = acc;
          mx = std::max(mx, acc);
        }
        double sum = 0;
        for (int64_t j = 0; j < a.St; ++j) sum += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx);
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < a.St; ++j)
            if (s[j] != -INFINITY) acc += std::exp(s[j] - mx) / sum * vrow(j, e);
          out[((b * c.L + i) * c.H + h) * c.dv + e] = sum > 0 ? acc : NAN;
        }
      }
  return out;
}

// Every instance this CPU runs, through flash_kernel()'s own dispatch.
std::vector<cpu::FlashKernel> kernels() { return cpu::flash_kernels().available(); }

std::vector<float> run(cpu::FlashKernel kern, const cpu::FlashArgs& a) {
  cpu::FlashScratch s;
  s.resize(a.dh, a.dv);
  // Every task in turn, on one scratch: a task must not depend on what an
  // earlier one left there.
  const int64_t sets = cpu::flash_head_sets(a.H, a.Hkv), nqb = cpu::flash_query_blocks(a.L);
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t hs = 0; hs < sets; ++hs)
      for (int64_t qb = nqb - 1; qb >= 0; --qb) kern(a, b, hs, qb, s);
  return std::vector<float>(a.ctx, a.ctx + a.B * a.L * a.H * a.dv);
}

TEST(FlashKernel, EveryIsaMatchesFloat64AndTheOthersBitForBit) {
  const std::vector<FlashCase> cases = {
      // B, L, S, H, Hkv, dh, dv, causal, window, mask, bias_kv, zero_key, mask_h
      {1, 200, 200, 8, 2, 64, 64, true, 0, false, false, false},      // GQA 4: one whole set
      {1, 150, 150, 16, 2, 32, 32, true, 0, false, false, false},     // GQA 8: two sets
      {2, 97, 97, 6, 1, 40, 24, true, 37, false, false, false},       // MQA 6: a set of 4 and one of 2, window
      {1, 130, 130, 4, 4, 128, 128, true, 0, false, false, false},    // MHA, head_dim 128
      {2, 50, 210, 4, 2, 20, 36, false, 0, true, true, true, 4},      // cross, per-head mask, bias and zero keys
      {1, 193, 193, 3, 3, 17, 9, false, 50, true, false, true, 1},    // window without causality, broadcast mask
      {1, 1, 300, 2, 1, 16, 16, false, 0, false, false, false},       // one query
      // No mask and no cut: a last key block of 6 and of 7 rows, which the
      // ISAs' tiles pad differently (6- and 8-row score tiles).
      {1, 1, 102, 2, 1, 16, 16, false, 0, false, false, false},
      {1, 40, 199, 4, 2, 24, 24, false, 0, false, false, false},
  };
  std::mt19937 g(12);
  for (const FlashCase& c : cases) {
    SCOPED_TRACE("L " + std::to_string(c.L) + " S " + std::to_string(c.S) + " H " + std::to_string(c.H) + "/" +
                 std::to_string(c.Hkv) + " dh " + std::to_string(c.dh) + " dv " + std::to_string(c.dv));
    const Data d = make_data(c, g);
    std::vector<float> ctx;
    const cpu::FlashArgs a = make_args(c, d, ctx);
    const std::vector<double> want = reference(c, d, a);
    std::vector<std::vector<float>> got;
    for (cpu::FlashKernel kern : kernels()) {
      got.push_back(run(kern, a));
      const std::vector<float>& y = got.back();
      int64_t nan = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(y[i])) << i;
          ++nan;
          continue;
        }
        ASSERT_NEAR(y[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << "element " << i;
      }
      if (!c.mask) {
        EXPECT_EQ(nan, 0);
      }
    }
    // Same tile order per element, the same exp2 fit: the ISAs agree exactly.
    for (std::size_t k = 1; k < got.size(); ++k)
      for (std::size_t i = 0; i < got[0].size(); ++i)
        if (!std::isnan(got[0][i])) {
          ASSERT_EQ(got[0][i], got[k][i]) << "element " << i;
        }
  }
}

// Partial attention (FlashArgs::state_m, backends/partial.h): self-attention
// split into query blocks [0, 110) and [110, L) and key blocks [0, 150) and
// [150, L), each given with its token offset; every query block attends
// every key block in turn, carrying its state, and the normalised state
// matches float64 on each ISA. (Not bit for bit across ISAs: a key block
// whose length is a multiple of AVX2's 6-row tile but not of AVX-512's 12
// is padded, and so masked, on one ISA only, which changes how its
// exponents round.)
TEST(FlashKernel, PartialBlocksCarryTheStateOnEveryIsa) {
  const std::vector<FlashCase> cases = {
      {2, 260, 260, 8, 2, 32, 32, true, 0, false, false, false},
      {1, 260, 260, 6, 1, 40, 24, true, 37, false, false, false},
      {1, 260, 260, 3, 3, 17, 9, false, 50, false, false, false},
      {1, 260, 260, 4, 2, 16, 16, false, 0, false, false, false},
  };
  std::mt19937 g(21);
  for (const FlashCase& c : cases) {
    SCOPED_TRACE("H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " causal " + std::to_string(c.causal) +
                 " window " + std::to_string(c.window));
    const Data d = make_data(c, g);
    std::vector<float> unused;
    const std::vector<double> want = reference(c, d, make_args(c, d, unused));
    const int64_t cuts_q[3] = {0, 110, c.L}, cuts_k[3] = {0, 150, c.S};
    for (cpu::FlashKernel kern : kernels()) {
      std::vector<float> acc(c.B * c.L * c.H * c.dv, 0.0f), l(c.B * c.L * c.H, 0.0f);
      std::vector<float> m(c.B * c.L * c.H, -std::numeric_limits<float>::infinity());
      for (int kb = 0; kb < 2; ++kb) {
        const int64_t k0 = cuts_k[kb], nk = cuts_k[kb + 1] - k0;
        std::vector<float> kblk, vblk;  // rows [k0, k0 + nk) of every batch, contiguous
        for (int64_t b = 0; b < c.B; ++b) {
          kblk.insert(kblk.end(), d.k.begin() + (b * c.S + k0) * c.Hkv * c.dh, d.k.begin() + (b * c.S + k0 + nk) * c.Hkv * c.dh);
          vblk.insert(vblk.end(), d.v.begin() + (b * c.S + k0) * c.Hkv * c.dv, d.v.begin() + (b * c.S + k0 + nk) * c.Hkv * c.dv);
        }
        for (int qb = 0; qb < 2; ++qb) {
          const int64_t q0 = cuts_q[qb], nq = cuts_q[qb + 1] - q0;
          cpu::FlashArgs a = make_args(c, d, unused);
          a.L = nq, a.q_batch_rows = c.L, a.S = a.St = nk;
          a.q = d.q.data() + q0 * a.ldq, a.k = kblk.data(), a.v = vblk.data();
          a.q_pos0 = q0, a.k_pos0 = k0;
          a.ctx = acc.data() + q0 * a.ldc;
          a.state_m = m.data() + q0 * c.H, a.state_l = l.data() + q0 * c.H;
          run(kern, a);
        }
      }
      for (int64_t r = 0; r < c.B * c.L * c.H; ++r)
        for (int64_t e = 0; e < c.dv; ++e) acc[r * c.dv + e] /= l[r];
      for (std::size_t i = 0; i < acc.size(); ++i) ASSERT_NEAR(acc[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << i;
    }
  }
}

TEST(FlashKernel, HeadSetsCoverEveryHeadOnce) {
  EXPECT_EQ(cpu::flash_head_sets(32, 8), 8);   // groups of 4: one set each
  EXPECT_EQ(cpu::flash_head_sets(32, 1), 8);   // MQA: 32 heads in sets of 4
  EXPECT_EQ(cpu::flash_head_sets(6, 1), 2);    // 4 + 2
  EXPECT_EQ(cpu::flash_head_sets(16, 16), 16); // MHA: one head each
}

TEST(FlashKernel, TheIsaInUseIsNamed) {
  const std::string isa = cpu::flash_kernel_isa();
  EXPECT_TRUE(isa == "avx2" || isa == "avx512") << isa;
  EXPECT_EQ(isa == "avx512", cpu::flash_kernel() == cpu::flash_block_avx512);
}

}  // namespace
}  // namespace mha
