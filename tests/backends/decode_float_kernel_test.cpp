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

// The V pass on any bytes the block formats can hold, not only what the
// encoder writes, keeps each element's chain over the values the kernel
// reads (the scalar definition for q8_0 / q4_0; sign * m * bfp_scale(e,
// top) for the block floats). Two kinds of cache:
// - any: q8_0 / q4_0 scales of either sign, +-0, the smallest subnormal, the
//   largest finite, +-Inf and NaN, or random; block-float shared exponents
//   from 0 (read as zero) to 255 (m * 2^(128 - top), Inf for the larger
//   codes), or random; random codes.
// - underflow: every block tiny (scales +-0 or the smallest, exponent 0 or
//   top + 1; codes mostly 0 and -0, else +-1), all keys zero but one, and
//   the score scale set so that the others' weights are 2^-126.25
//   (subnormal): their products underflow to zeros of either sign, so an
//   output element is a zero whose sign the last such product and the
//   signs of the zero values after it decide. A V pass that decodes a zero
//   with another sign, or rounds where the definition does not, fails here.
// Each also with only the q8_0 / q4_0 scales AVX2's convert-free decode
// takes (q8_0 positive, q4_0 nonzero, both finite: from the smallest
// subnormal to the largest), which it runs on whole V blocks.
struct BlockV {
  std::vector<unsigned char> bytes;
  std::vector<float> vals;
};

// One block's scale (q8_0 / q4_0) or shared exponent, and its codes made tiny.
// finite: q8_0 scales positive and finite, q4_0 ones finite and nonzero
// (the scales AVX2's convert-free V decode takes).
void set_block(CacheDtype dt, unsigned char* p, bool tiny, bool finite, std::mt19937& g) {
  const bool ggml = dt == CacheDtype::Q8_0 || dt == CacheDtype::Q4_0;
  const uint16_t scales[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00};
  const int top = dt == CacheDtype::Bfloat8_b ? 6 : 2;
  const int exps[] = {0, top, top + 1, 100, 127, 237, 238, 254, 255};
  if (ggml && finite) {
    const uint16_t fin[] = {0x0001, 0x0400, 0x3c00, 0x7bff, static_cast<uint16_t>(1 + g() % 0x7bff)};
    const uint16_t sign = dt == CacheDtype::Q4_0 && g() % 2 ? 0x8000 : 0;
    const uint16_t sc = static_cast<uint16_t>((tiny ? fin[0] : fin[g() % 5]) | sign);
    std::memcpy(p, &sc, 2);
  } else if (ggml) {
    const uint16_t sc = tiny ? scales[g() % 4] : g() % 3 ? scales[g() % 12] : static_cast<uint16_t>(g());
    std::memcpy(p, &sc, 2);
  } else {
    p[0] = static_cast<unsigned char>(tiny ? (g() % 2 ? 0 : top + 1) : g() % 3 ? exps[g() % 9] : g());
  }
  if (!tiny) return;
  const int64_t nc = kv_row_bytes(dt, ggml ? 32 : 16) - (ggml ? 2 : 1);
  for (int64_t i = 0; i < nc; ++i) {
    const unsigned r = g() % 16 < 13 ? g() % 2 : 2 + g() % 2;  // codes for 0, -0 (q8_0 / q4_0: 0 again), 1, -1
    unsigned char* c = p + (ggml ? 2 : 1) + i;
    if (dt == CacheDtype::Q8_0) *c = static_cast<unsigned char>(r < 2 ? 0 : r == 2 ? 1 : 255);
    else if (dt == CacheDtype::Q4_0) *c = static_cast<unsigned char>((r < 2 ? 8 : r == 2 ? 9 : 7) * 17);
    else if (dt == CacheDtype::Bfloat8_b) *c = static_cast<unsigned char>((r & 1) << 7 | (r >> 1));
    else *c = static_cast<unsigned char>(((r & 1) << 3 | (r >> 1)) * 17);
  }
}

BlockV block_v_rows(CacheDtype dt, int64_t rows, int64_t dv, bool tiny, bool finite, std::mt19937& g) {
  const int64_t rb = kv_row_bytes(dt, dv);
  BlockV h{std::vector<unsigned char>(rows * rb), std::vector<float>(rows * dv)};
  for (auto& x : h.bytes) x = static_cast<unsigned char>(g());
  const bool ggml = dt == CacheDtype::Q8_0 || dt == CacheDtype::Q4_0;
  const int64_t blk = ggml ? 32 : 16, bb = kv_row_bytes(dt, blk);
  const int top = dt == CacheDtype::Bfloat8_b ? 6 : 2;
  for (int64_t b = 0; b < rows * dv / blk; ++b) set_block(dt, h.bytes.data() + b / (dv / blk) * rb + b % (dv / blk) * bb, tiny, finite, g);
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* row = h.bytes.data() + r * rb;
    float* y = h.vals.data() + r * dv;
    if (ggml) {
      kv_row_to_f32_scalar(dt, row, dv, y);
      continue;
    }
    for (int64_t e = 0; e < dv; ++e) {
      const unsigned char* f = row + e / 16 * bb;
      const int i = static_cast<int>(e % 16);
      const int code = dt == CacheDtype::Bfloat8_b ? f[1 + i] : (f[1 + i % 8] >> (i / 8 * 4)) & 15;
      const float s = f[0] > top ? std::ldexp(1.0f, f[0] - 127 - top) : 0.0f;
      y[e] = std::copysign(static_cast<float>(code & ((1 << (top + 1)) - 1)) * s, code >> (top + 1) ? -1.0f : 1.0f);
    }
  }
  return h;
}

TEST(DecodeVPass, AnyBlockBytesKeepTheChainOfTheirValues) {
  std::mt19937 g(29);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t dv : {96, 128})
    for (CacheDtype dt : {CacheDtype::Q8_0, CacheDtype::Q4_0, CacheDtype::Bfloat8_b, CacheDtype::Bfloat4_b})
      for (int mode = 0; mode < 6; ++mode) {  // any bytes with score scales 0.2 and 30; underflow; each with finite scales
        const bool underflow = mode % 3 == 2, finite = mode >= 3;
        SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " dv " + std::to_string(dv) + " mode " + std::to_string(mode));
        const int64_t G = 8, dh = 64, j0 = 3, j1 = 1003, rows = j1 + 5, jmax = 700, n = j1 - j0;
        std::vector<float> q(G * dh), k(rows * dh);
        for (auto* x : {&q, &k})
          for (float& e : *x) e = u(g);
        if (underflow) {  // every head the same query; every key 0 but jmax, which is the query
          for (int64_t i = 0; i < G * dh; ++i) q[i] = q[i % dh];
          for (int64_t i = 0; i < rows * dh; ++i) k[i] = i / dh == jmax ? q[i % dh] : 0.0f;
        }
        const int64_t kb = kv_row_bytes(dt, dh), vb = kv_row_bytes(dt, dv);
        const std::vector<unsigned char> kc = test::encode_rows(dt, k, rows, dh);
        const BlockV v = block_v_rows(dt, rows, dv, underflow, finite, g);
        for (cpu::DecodeKernel kern : cpu::decode_kernels()) {
          SCOPED_TRACE(cpu::decode_kernel_isa(kern));
          std::vector<float> s(G * n), o(G * dv, 1e30f), m(G), l(G);
          cpu::DecodeChunk c;
          c.q = q.data(), c.k = kc.data(), c.v = v.bytes.data(), c.dt = dt, c.kbytes = kb, c.vbytes = vb;
          c.j0 = j0, c.j1 = j1, c.G = G, c.dh = dh, c.dv = dv, c.scale_log2 = mode % 3 == 0 ? 0.2f : 30.0f;
          c.s = s.data(), c.o = o.data(), c.m = m.data(), c.l = l.data();
          if (underflow) {  // jmax's score 126.25 log2 units above the others' 0
            c.scale_log2 = 1.0f, c.scores_only = true;
            kern(c);
            c.scale_log2 = 126.25f / s[jmax - j0], c.scores_only = false;
          }
          kern(c);
          int64_t mismatches = 0, neg_zero = 0;
          for (int64_t h = 0; h < G; ++h)
            for (int64_t e = 0; e < dv; ++e) {
              float acc = 0.0f;
              for (int64_t j = j0; j < j1; ++j) acc = std::fma(s[h * n + (j - j0)], v.vals[j * dv + e], acc);
              const float got = o[h * dv + e];
              mismatches += std::memcmp(&acc, &got, sizeof(float)) != 0 && !(std::isnan(acc) && std::isnan(got));
              neg_zero += acc == 0.0f && std::signbit(acc);
            }
          EXPECT_EQ(mismatches, 0);
          if (underflow) {
            EXPECT_GT(neg_zero, 0);  // the case is reached (48-192 of 768-1024 elements when written)
          }
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
