// The decode chunk kernel bit for bit: the P.V pass on every cache format,
// the scores on the one-element ones (float32, float16, bfloat16).
// P.V pass: each output element is one chain of float multiply-adds over
// the chunk's keys in order,
//   o[h, e] = fma(p[h, j], v[j, e], o[h, e]),  j = j0 .. j1-1, from 0,
// however the pass tiles heads, elements and keys and however far ahead it
// prefetches: the kernel's own softmax weights (left in c.s) pushed through
// std::fma in that order must give its o exactly. Widths are whole vectors
// (a scalar tail column rounds the product before the add), with more keys
// than the V pass's prefetch distance so that the prefetch runs ahead of,
// and off the end of, the chunk.
// Scores: a key's score is one FMA chain per vector lane over d, then one
// fixed reduction tree, whichever batch of keys it falls in (AVX2 scores
// three keys at a time, then two). A chunk of 208 keys and one that starts
// 16 keys later (192) put every key in another slot of its three-key batch
// and four keys in a two-key batch in one and a three-key one in the other;
// both are whole 16-key vectors for the softmax, so each key's weight
// 2^(s - m) must keep its bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"
#include "kv_rows.h"

namespace mha {
namespace {

TEST(DecodeVPass, EveryFormatIsOneFmaChainPerElement) {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-1, 1);
  // G 8: two head quads (the prefetching one and another); G 6: a quad and
  // the leftover heads. dv 80 on AVX-512 is one 4-vector strip and a single
  // vector; 128 two strips. j0 > 0 and 1000 keys: a partial last block.
  // The block formats (dv a whole number of their 32- or 16-element
  // blocks) are held to the same chain over the values kv_rows_to_f32
  // decodes: 96 on AVX-512 is a strip and two single vectors, on AVX2
  // (strips of 16 or 24 elements) a strip that ends mid-block.
  for (int64_t G : {8, 6})
    for (int64_t dv : {80, 96, 128})
      for (CacheDtype dt : kAllCacheDtypes) {
        if (dv % cache_dtype_block(dt) != 0 || (dv == 96) != (cache_dtype_block(dt) > 1)) continue;
        SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " G " + std::to_string(G) + " dv " + std::to_string(dv));
        const int64_t dh = 64, j0 = 3, j1 = 1003, rows = j1 + 5;
        std::vector<float> q(G * dh), k(rows * dh), v(rows * dv);
        for (auto* x : {&q, &k, &v})
          for (float& e : *x) e = u(g);
        const int64_t kb = kv_row_bytes(dt, dh), vb = kv_row_bytes(dt, dv);
        const std::vector<unsigned char> kc = test::encode_rows(dt, k, rows, dh), vc = test::encode_rows(dt, v, rows, dv);
        // The values the kernel reads, by the scalar definition (not the
        // SIMD decoders the kernel shares with kv_rows_to_f32).
        for (int64_t j = 0; j < rows; ++j) kv_row_to_f32_scalar(dt, vc.data() + j * vb, dv, v.data() + j * dv);
        for (cpu::DecodeKernel kern : cpu::decode_kernels()) {
          SCOPED_TRACE(cpu::decode_kernel_isa(kern));
          const int64_t n = j1 - j0;
          std::vector<float> s(G * n), o(G * dv, 1e30f), m(G), l(G);
          cpu::DecodeChunk c;
          c.q = q.data(), c.k = kc.data(), c.v = vc.data(), c.dt = dt, c.kbytes = kb, c.vbytes = vb;
          c.j0 = j0, c.j1 = j1, c.G = G, c.dh = dh, c.dv = dv, c.scale_log2 = 0.2f;
          c.s = s.data(), c.o = o.data(), c.m = m.data(), c.l = l.data();
          kern(c);
          int64_t mismatches = 0;
          for (int64_t h = 0; h < G; ++h)
            for (int64_t e = 0; e < dv; ++e) {
              float acc = 0.0f;
              for (int64_t j = j0; j < j1; ++j) acc = std::fma(s[h * n + (j - j0)], v[j * dv + e], acc);
              mismatches += std::memcmp(&acc, &o[h * dv + e], sizeof(float)) != 0;
            }
          EXPECT_EQ(mismatches, 0);
          float l0 = 0.0f;  // and the weights are the softmax's: sum to l, largest 1
          float pmax = 0.0f;
          for (int64_t j = 0; j < n; ++j) l0 += s[j], pmax = std::max(pmax, s[j]);
          EXPECT_NEAR(l0, l[0], 1e-5f * l[0]);
          EXPECT_EQ(pmax, 1.0f);
        }
      }
}

// Each ISA's decoders (the kernel's V-pass values, and decode_widen's) give
// the scalar definition's bits for every code: rows of random bytes, which
// are valid rows of the block formats (q8_0 / q4_0 scales may be any fp16,
// NaN included), with the block floats' shared exponents above the
// magnitude's top bit (below it kv_rows_to_f32 redoes the face row) and
// below 255 (where the scalar definition's exponent field overflows to Inf /
// NaN, tt-metal's unpack, and the decoders give the finite m * 2^(255 - 127
// - top)). -0 codes included: a decoder that loses a zero's sign fails here.
TEST(DecodeWiden, EveryIsaDecodesEveryCodeAsTheScalarDefinition) {
  std::mt19937 g(3);
  std::vector<cpu::DecodeWiden> widens{cpu::decode_widen_avx2};
  if (vec::cpu_supports(vec::Isa::Avx512)) widens.push_back(cpu::decode_widen_avx512);
  for (CacheDtype dt : {CacheDtype::Q8_0, CacheDtype::Q4_0, CacheDtype::Bfloat8_b, CacheDtype::Bfloat4_b}) {
    SCOPED_TRACE(cache_dtype_name(dt));
    const int64_t n = 64, d = 256, rb = kv_row_bytes(dt, d);
    std::vector<unsigned char> rows(n * rb);
    for (auto& x : rows) x = static_cast<unsigned char>(g());
    if (dt == CacheDtype::Bfloat8_b || dt == CacheDtype::Bfloat4_b) {
      const int top = dt == CacheDtype::Bfloat8_b ? 6 : 2, fb = dt == CacheDtype::Bfloat8_b ? 17 : 9;
      for (int64_t f = 0; f < n * d / 16; ++f)
        rows[f / (d / 16) * rb + f % (d / 16) * fb] = static_cast<unsigned char>(f % 7 ? top + 1 + g() % (254 - top) : 254);
    }
    std::vector<float> want(n * d);
    for (int64_t r = 0; r < n; ++r) kv_row_to_f32_scalar(dt, rows.data() + r * rb, d, want.data() + r * d);
    for (cpu::DecodeWiden w : widens) {
      std::vector<float> got(n * d);
      w(dt, rows.data(), n, d, rb, got.data(), d);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n * d; ++i)
        mismatches += std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]));
      EXPECT_EQ(mismatches, 0) << (w == cpu::decode_widen_avx2 ? "avx2" : "avx512");
    }
  }
}

TEST(DecodeScores, KeyScoreKeepsItsBitsInAnyBatch) {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t dh : {128, 40})  // 40: whole AVX2 vectors, not AVX-512 ones (the per-key path there)
    for (CacheDtype dt : {CacheDtype::Float32, CacheDtype::Float16, CacheDtype::Bfloat16}) {
      SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " dh " + std::to_string(dh));
      const int64_t G = 8, dv = 32, j0 = 2, j1 = j0 + 208, shift = 16;
      std::vector<float> q(G * dh), k(j1 * dh), v(j1 * dv);
      for (auto* x : {&q, &k, &v})
        for (float& e : *x) e = u(g);
      // The keys only the first chunk has small, so that each head's
      // largest score (m) is in both.
      for (int64_t j = j0; j < j0 + shift; ++j)
        for (int64_t d = 0; d < dh; ++d) k[j * dh + d] *= 1e-3f;
      const int64_t kb = kv_row_bytes(dt, dh), vb = kv_row_bytes(dt, dv);
      const std::vector<unsigned char> kc = test::encode_rows(dt, k, j1, dh), vc = test::encode_rows(dt, v, j1, dv);
      for (cpu::DecodeKernel kern : cpu::decode_kernels()) {
        SCOPED_TRACE(cpu::decode_kernel_isa(kern));
        std::vector<float> s[2], m[2];
        for (int r = 0; r < 2; ++r) {
          const int64_t first = j0 + r * shift, n = j1 - first;
          std::vector<float> o(G * dv), l(G);
          s[r].assign(G * n, 0.0f), m[r].assign(G, 0.0f);
          cpu::DecodeChunk c;
          c.q = q.data(), c.k = kc.data(), c.v = vc.data(), c.dt = dt, c.kbytes = kb, c.vbytes = vb;
          c.j0 = first, c.j1 = j1, c.G = G, c.dh = dh, c.dv = dv, c.scale_log2 = 0.5f;
          c.s = s[r].data(), c.o = o.data(), c.m = m[r].data(), c.l = l.data();
          kern(c);
        }
        EXPECT_EQ(std::memcmp(m[0].data(), m[1].data(), sizeof(float) * G), 0);
        int64_t mismatches = 0;
        for (int64_t h = 0; h < G; ++h)
          for (int64_t j = j0 + shift; j < j1; ++j)
            mismatches += std::memcmp(&s[0][h * (j1 - j0) + (j - j0)], &s[1][h * (j1 - j0 - shift) + (j - j0 - shift)],
                                      sizeof(float)) != 0;
        EXPECT_EQ(mismatches, 0);
      }
    }
}

}  // namespace
}  // namespace mha
