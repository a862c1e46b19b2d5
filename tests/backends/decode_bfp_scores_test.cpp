// The block-float caches' integer K scores (cpu_decode_kernel.inc, iscores)
// bit for bit against a scalar oracle written from docs/CONFIG.md "Error
// bounds", on every instance of the chunk kernel this CPU runs:
//   query: each row in blocks of 16 (one key face row), ggml's q8_0 rule:
//     d = max|x| / 127, codes round(x / d) half away from zero, scale fp16(d)
//   key: face row f of shared exponent e and sign-magnitude codes (7 or 3
//     magnitude bits) is the integers +-m times 2^(e - 127 - top), top = 7 or
//     3 minus 1; e <= top reads as zero
//   s[h, j] = scale_log2 * sum_f dq_hf * 2^(e_jf - 127 - top) * sum_i q_i k_i
// The inputs make every float operation exact (query blocks of amax 127 *
// 2^t, so fp16(d) = 2^t and the codes are the chosen integers; shared
// exponents within two of each other, scale_log2 a power of two), so the
// kernel's sums in any order must give the oracle's value exactly: a wrong
// sign, offset correction, lane or scale anywhere changes the bits. Edge
// values: zero shared exponents with nonzero codes, exponents 1..top (read
// as zero), magnitude 127 / 7 everywhere, negative zeros, all-zero query
// blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"

namespace mha {
namespace {

struct ScoreShape {
  int64_t G, dh, j0, j1;
};

// Query rows [G, dh]: each 16-block is integers in [-127, 127] times 2^t
// (t in -1..0) with one element at +-127, or all zeros.
std::vector<float> exact_query(std::mt19937& g, int64_t G, int64_t dh) {
  std::vector<float> q(G * dh);
  std::uniform_int_distribution<int> code(-127, 127), pick(0, 15), t(-1, 0), kind(0, 9);
  for (int64_t b = 0; b < G * dh; b += 16) {
    const int k = kind(g);
    if (k == 0) continue;  // an all-zero block: scale 0, codes 0
    const float s = std::ldexp(1.0f, t(g));
    for (int64_t e = 0; e < 16; ++e) q[b + e] = static_cast<float>(code(g)) * s;
    q[b + pick(g)] = (k % 2 ? 127.0f : -127.0f) * s;
  }
  return q;
}

// One cached row of dh elements in format dt, written byte by byte: shared
// exponents E or E + 1 mostly, some 0 or 1..top (read as zero), codes
// random, or all at the largest magnitude, with negative zeros among them.
std::vector<unsigned char> exact_key_row(std::mt19937& g, CacheDtype dt, int64_t dh) {
  const bool b8 = dt == CacheDtype::Bfloat8_b;
  const int bits = b8 ? 7 : 3, top = bits - 1, E = 120;
  std::vector<unsigned char> row(kv_row_bytes(dt, dh));
  std::uniform_int_distribution<int> kind(0, 9), code(0, (1 << (bits + 1)) - 1), tiny(1, top), bit(0, 1);
  const int64_t step = b8 ? 17 : 9;
  for (int64_t f = 0; f < dh / 16; ++f) {
    unsigned char* p = row.data() + f * step;
    const int k = kind(g);
    p[0] = static_cast<unsigned char>(k == 0 ? 0 : k == 1 ? tiny(g) : E + bit(g));
    int c[16];
    for (int i = 0; i < 16; ++i) {
      c[i] = code(g);
      if (k == 2) c[i] = (bit(g) << bits) | ((1 << bits) - 1);  // largest magnitudes
      if (k == 3 && i % 3 == 0) c[i] = 1 << bits;               // negative zeros
    }
    for (int i = 0; i < 16; ++i) {
      if (b8) p[1 + i] = static_cast<unsigned char>(c[i]);
      else if (i < 8) p[1 + i] = static_cast<unsigned char>(c[i] | c[i + 8] << 4);
    }
  }
  return row;
}

// The documented rule, in double (exact for these inputs).
double oracle_score(CacheDtype dt, const float* q, const unsigned char* row, int64_t dh, float scale_log2) {
  const bool b8 = dt == CacheDtype::Bfloat8_b;
  const int bits = b8 ? 7 : 3, top = bits - 1;
  const int64_t step = b8 ? 17 : 9;
  double s = 0;
  for (int64_t f = 0; f < dh / 16; ++f) {
    const float* x = q + 16 * f;
    float amax = 0;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    const double dq = static_cast<double>(d);  // fp16(d) = d: d is a power of two here
    const unsigned char* p = row + f * step;
    const int e = p[0];
    const double dk = e > top ? std::ldexp(1.0, e - 127 - top) : 0.0;
    int64_t acc = 0;
    for (int i = 0; i < 16; ++i) {
      const int c = b8 ? p[1 + i] : (p[1 + i % 8] >> (i < 8 ? 0 : 4)) & 15;
      const int m = c & ((1 << bits) - 1), v = c >> bits ? -m : m;
      acc += static_cast<int64_t>(std::round(x[i] * id)) * v;
    }
    s += dq * dk * static_cast<double>(acc);
  }
  return s * scale_log2;
}

TEST(DecodeBfpScores, IntegerScoresAreTheDocumentedRuleBitForBit) {
  std::mt19937 g(21);
  const std::vector<cpu::DecodeKernel> kernels = cpu::decode_kernels();
  const float scale_log2 = 0.5f;
  // G 8 / 4: the batched path (4 heads x KB keys) and its key tail; G 6, 3,
  // 5: leftover heads; dh 16..144: one face row, odd numbers of them (short
  // last units on both ISAs), 128; chunks of 1, 3 and 37 keys from j0 > 0.
  // G 36 x 128 is past the integer path's 4096 query elements: the float
  // scores, which these exact inputs must give the same bits.
  const std::vector<ScoreShape> shapes{{8, 128, 3, 40}, {4, 16, 0, 9},  {6, 48, 2, 5},  {3, 80, 1, 2}, {5, 144, 0, 37},
                                  {4, 112, 5, 8},  {8, 32, 0, 64}, {4, 64, 7, 8},  {36, 128, 0, 9}};
  for (CacheDtype dt : {CacheDtype::Bfloat8_b, CacheDtype::Bfloat4_b})
    for (const ScoreShape& sh : shapes) {
      SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " G " + std::to_string(sh.G) + " dh " + std::to_string(sh.dh) +
                   " keys " + std::to_string(sh.j0) + ".." + std::to_string(sh.j1));
      const std::vector<float> q = exact_query(g, sh.G, sh.dh);
      const int64_t rb = kv_row_bytes(dt, sh.dh);
      std::vector<unsigned char> k(sh.j1 * rb);
      for (int64_t j = 0; j < sh.j1; ++j) {
        const std::vector<unsigned char> r = exact_key_row(g, dt, sh.dh);
        std::memcpy(k.data() + j * rb, r.data(), rb);
      }
      const int64_t n = sh.j1 - sh.j0;
      for (cpu::DecodeKernel kern : kernels) {
        SCOPED_TRACE(cpu::decode_kernel_isa(kern));
        std::vector<float> s(sh.G * n, -1.0f);
        cpu::DecodeChunk c;
        c.q = q.data(), c.k = k.data(), c.v = k.data(), c.dt = dt, c.kbytes = rb, c.vbytes = rb;
        c.j0 = sh.j0, c.j1 = sh.j1, c.G = sh.G, c.dh = sh.dh, c.dv = sh.dh, c.scale_log2 = scale_log2;
        c.s = s.data(), c.scores_only = true;
        kern(c);
        for (int64_t h = 0; h < sh.G; ++h)
          for (int64_t j = sh.j0; j < sh.j1; ++j) {
            const float want = static_cast<float>(oracle_score(dt, q.data() + h * sh.dh, k.data() + j * rb, sh.dh, scale_log2));
            const float got = s[h * n + (j - sh.j0)];
            EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << "head " << h << " key " << j << ": " << got << " want " << want;
          }
      }
    }
}

}  // namespace
}  // namespace mha
