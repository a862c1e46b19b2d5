// SDPA decode, the KV cache ops and rotary_embedding_llama in the numeric
// core: the vector path bit for bit against the lane models (Isa::Scalar),
// properties that follow from the kernels' structure (masking, paging,
// one-chunk grids, which rows a cache write touches), and accuracy against a
// float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/ttsim/ops/kv_cache/kv_cache_kernel.h"
#include "ttsim/packer.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

const Exec kFast{};  // the best instruction set this CPU has


// softmax(q k^T * scale) v over positions 0..cur_pos (with a window W > 0:
// cur_pos - W + 1..cur_pos), in float64, for user b and q head h of caches
// [b, nkv, S, dh] (GQA: head h reads kv head h / G); a sink adds
// exp(sink * scale) to the denominator only.
std::vector<double> reference_row(const TileTensor& q, const TileTensor& k, const TileTensor& v, int64_t b, int64_t h,
                                  int64_t cur_pos, int64_t window = 0, const float* sink = nullptr) {
  const int64_t nh = q.shape[2], nkv = k.shape[1], dh = q.shape[3], kvh = h / (nh / nkv);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const int64_t p0 = window > 0 ? std::max<int64_t>(0, cur_pos - window + 1) : 0;
  std::vector<double> s(static_cast<size_t>(cur_pos + 1)), out(static_cast<size_t>(dh), 0.0);
  double m = sink ? *sink * scale : -1e300, sum = sink ? 1.0 : 0.0;
  for (int64_t p = p0; p <= cur_pos; ++p) {
    double dot = 0;
    for (int64_t d = 0; d < dh; ++d) dot += static_cast<double>(q.at(b, h, d)) * k.at(b * nkv + kvh, p, d);
    s[p] = dot * scale;
    m = std::max(m, s[p]);
  }
  if (sink) sum = std::exp(*sink * scale - m);
  for (int64_t p = p0; p <= cur_pos; ++p) {
    const double e = std::exp(s[p] - m);
    sum += e;
    for (int64_t d = 0; d < dh; ++d) out[d] += e * v.at(b * nkv + kvh, p, d);
  }
  for (double& x : out) x /= sum;
  return out;
}


struct DecodeCase {
  const char* name;
  int64_t b, nh, nkv, S, dh;
  std::vector<int64_t> cur_pos;
  SdpaDecodeConfig cfg;
  DataFormat kv_format = DataFormat::Bfloat16;
};

// At tt_metal 2024: this file checks that profile's decode kernel (the
// latest one has sdpa_decode_latest_test.cpp).
SdpaDecodeConfig config(int64_t chunk, MathFidelity fid, bool fp32, bool exp_approx, int gx, int gy, int max_cores = 0) {
  SdpaDecodeConfig c;
  c.compute.tt_metal = TtMetal::R2024;
  c.k_chunk_size = chunk;
  c.compute.math_fidelity = fid;
  c.compute.fp32_dest_acc_en = fp32;
  c.exp_approx_mode = exp_approx;
  c.grid_x = gx;
  c.grid_y = gy;
  c.max_cores_per_head_batch = max_cores;
  return c;
}

}  // namespace

// The vector path equals the lane models across chunk sizes, fidelities, Dst
// modes, exp modes, cache formats, GQA ratios, grids (1, 3 and 8 cores per
// head: a tree with orphans) and positions at 0, chunk edges and the last.
TEST(TtsimSdpaDecode, VectorEqualsOracleAcrossConfigs) {
  const std::vector<DecodeCase> cases = {
      {"default", 2, 8, 2, 512, 64, {0, 511}, config(0, MathFidelity::HiFi2, false, true, 8, 8)},
      {"chunk edges", 3, 4, 1, 256, 32, {31, 32, 63}, config(32, MathFidelity::HiFi2, false, true, 8, 8)},
      {"fp32 HiFi4 exact exp", 2, 4, 4, 256, 64, {100, 255}, config(64, MathFidelity::HiFi4, true, false, 8, 8)},
      {"LoFi 3 cores/head", 1, 8, 1, 512, 32, {300}, config(32, MathFidelity::LoFi, false, true, 3, 1)},
      {"bfp8 cache", 2, 8, 2, 256, 64, {17, 200}, config(64, MathFidelity::HiFi2, false, true, 4, 2),
       DataFormat::Bfp8_b},
      {"bfp4 cache fp32", 1, 2, 1, 256, 64, {255}, config(32, MathFidelity::HiFi3, true, true, 8, 8),
       DataFormat::Bfp4_b},
  };
  for (const DecodeCase& dc : cases) {
    const TileTensor q = randn_tile({1, dc.b, dc.nh, dc.dh}, DataFormat::Bfloat16, 11);
    const TileTensor k = randn_tile({dc.b, dc.nkv, dc.S, dc.dh}, dc.kv_format, 12);
    const TileTensor v = randn_tile({dc.b, dc.nkv, dc.S, dc.dh}, dc.kv_format, 13);
    const TileTensor oracle = tt_sdpa_decode(q, k, v, dc.cur_pos, nullptr, dc.cfg, kOracle);
    EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, v, dc.cur_pos, nullptr, dc.cfg, kFast), oracle)) << dc.name;
    for (const simd::Isa isa : {simd::Isa::Avx2}) {
      if (!simd::kernels_for(isa)) continue;
      EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, v, dc.cur_pos, nullptr, dc.cfg, Exec{isa, nullptr}), oracle))
          << dc.name << " avx2";
    }
    // Close to attention in float64 (bf16 scores and probabilities: PCC well above 0.99).
    for (int64_t b = 0; b < dc.b; ++b)
      for (int64_t h = 0; h < dc.nh; ++h) {
        const std::vector<double> ref = reference_row(q, k, v, b, h, dc.cur_pos[static_cast<size_t>(b)]);
        std::vector<double> got(ref.size());
        for (size_t d = 0; d < got.size(); ++d) got[d] = oracle.at(b, h, static_cast<int64_t>(d));
        if (dc.cur_pos[static_cast<size_t>(b)] > 0) {
          EXPECT_GT(pcc(ref, got), 0.98) << dc.name << " b" << b << " h" << h;
        }
      }
  }
}

// Positions past cur_pos never reach the output: they are masked in the last
// chunk and never read beyond it.
TEST(TtsimSdpaDecode, PositionsPastCurPosDoNotMatter) {
  const TileTensor q = randn_tile({1, 1, 4, 64}, DataFormat::Bfloat16, 1);
  TileTensor k = randn_tile({1, 1, 256, 64}, DataFormat::Bfloat16, 2), v = randn_tile({1, 1, 256, 64}, DataFormat::Bfloat16, 3);
  const SdpaDecodeConfig c = config(64, MathFidelity::HiFi2, false, true, 8, 8);
  const TileTensor before = tt_sdpa_decode(q, k, v, {70}, nullptr, c, kFast);
  for (int64_t p = 71; p < 256; ++p)
    for (int64_t d = 0; d < 64; ++d) k.at(0, p, d) = 64.0f, v.at(0, p, d) = -1000.0f;
  EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, v, {70}, nullptr, c, kFast), before));
}

// A paged cache read through a page table gives the bits of the same cache
// laid out contiguously.
TEST(TtsimSdpaDecode, PagedEqualsContiguous) {
  const int64_t block = 64, blocks_per_user = 4, users = 2, nkv = 2, dh = 64;
  const TileTensor q = randn_tile({1, users, 4, dh}, DataFormat::Bfloat16, 5);
  const TileTensor k = randn_tile({users, nkv, block * blocks_per_user, dh}, DataFormat::Bfp8_b, 6);
  const TileTensor v = randn_tile({users, nkv, block * blocks_per_user, dh}, DataFormat::Bfp8_b, 7);
  // Scatter user u's block j to physical block perm[u * 4 + j].
  const std::vector<int64_t> perm = {5, 0, 7, 2, 1, 6, 3, 4};
  TileTensor kp = make_tile_tensor({users * blocks_per_user, nkv, block, dh}, DataFormat::Bfp8_b), vp = kp;
  std::vector<std::vector<int64_t>> table(users);
  for (int64_t u = 0; u < users; ++u)
    for (int64_t j = 0; j < blocks_per_user; ++j) {
      const int64_t phys = perm[static_cast<size_t>(u * blocks_per_user + j)];
      table[static_cast<size_t>(u)].push_back(phys);
      for (int64_t h = 0; h < nkv; ++h)
        for (int64_t r = 0; r < block; ++r)
          for (int64_t d = 0; d < dh; ++d) {
            kp.at(phys * nkv + h, r, d) = k.at(u * nkv + h, j * block + r, d);
            vp.at(phys * nkv + h, r, d) = v.at(u * nkv + h, j * block + r, d);
          }
    }
  const SdpaDecodeConfig c = config(64, MathFidelity::HiFi2, false, true, 8, 8);
  const std::vector<int64_t> pos = {130, 255};
  EXPECT_TRUE(same_bits(tt_sdpa_decode(q, kp, vp, pos, &table, c, kFast), tt_sdpa_decode(q, k, v, pos, nullptr, c, kFast)));
  // The paged op's default chunk is the kernel's dynamic one, up to 8 tiles:
  // here 256 positions, a chunk over four 64-row pages.
  SdpaDecodeConfig dyn = c;
  dyn.k_chunk_size = 0;
  SdpaDecodeConfig wide = c;
  wide.k_chunk_size = 256;
  EXPECT_TRUE(same_bits(tt_sdpa_decode(q, kp, vp, pos, &table, dyn, kFast), tt_sdpa_decode(q, k, v, pos, nullptr, wide, kFast)));
  EXPECT_TRUE(same_bits(tt_sdpa_decode(q, kp, vp, pos, &table, dyn, kOracle), tt_sdpa_decode(q, k, v, pos, nullptr, wide, kFast)));
  EXPECT_EQ(sdpa_decode_k_chunk_size(dyn, 256, true, 130), 256);  // 5 tiles -> 8 tiles
  EXPECT_EQ(sdpa_decode_k_chunk_size(dyn, 256, true, 31), 32);
  EXPECT_EQ(sdpa_decode_k_chunk_size(dyn, 256, false, 31), 256);
}

// With one chunk in all, one core holds all the data whatever the grid: no
// merge, the same bits. With many chunks the merge order changes the bits but
// not the result beyond bf16 rounding.
TEST(TtsimSdpaDecode, GridOnlyMattersThroughTheMerge) {
  const TileTensor q = randn_tile({1, 1, 8, 64}, DataFormat::Bfloat16, 8);
  const TileTensor k = randn_tile({1, 1, 1024, 64}, DataFormat::Bfloat16, 9), v = randn_tile({1, 1, 1024, 64}, DataFormat::Bfloat16, 10);
  const TileTensor one = tt_sdpa_decode(q, k, v, {100}, nullptr, config(128, MathFidelity::HiFi2, false, true, 1, 1), kFast);
  EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, v, {100}, nullptr, config(128, MathFidelity::HiFi2, false, true, 8, 8), kFast), one));
  const TileTensor single = tt_sdpa_decode(q, k, v, {1023}, nullptr, config(32, MathFidelity::HiFi2, false, true, 1, 1), kFast);
  const TileTensor tree = tt_sdpa_decode(q, k, v, {1023}, nullptr, config(32, MathFidelity::HiFi2, false, true, 8, 8), kFast);
  double max_diff = 0;
  for (size_t i = 0; i < single.data.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(single.data[i] - tree.data[i])));
  EXPECT_LT(max_diff, 0.02);
  EXPECT_FALSE(same_bits(single, tree));  // 32 chunks on 1 core vs 4 per core merged over 8: rounding differs
}

TEST(TtsimSdpaDecode, RefusesWhatTtnnRefuses) {
  const TileTensor q = randn_tile({1, 2, 4, 64}, DataFormat::Bfloat16, 1);
  const TileTensor k = randn_tile({2, 2, 256, 64}, DataFormat::Bfloat16, 2);
  const SdpaDecodeConfig c = config(64, MathFidelity::HiFi2, false, true, 8, 8);
  EXPECT_THROW(tt_sdpa_decode(q, k, k, {256, 0}, nullptr, c, kFast), InputError);        // past the cache
  EXPECT_THROW(tt_sdpa_decode(q, k, k, {5}, nullptr, c, kFast), InputError);             // one position per user
  EXPECT_THROW(tt_sdpa_decode(q, k, k, {5, 5}, nullptr, config(96, MathFidelity::HiFi2, false, true, 8, 8), kFast),
               InputError);  // not a power of 2
  const TileTensor q3 = randn_tile({1, 2, 3, 64}, DataFormat::Bfloat16, 1);
  EXPECT_THROW(tt_sdpa_decode(q3, k, k, {5, 5}, nullptr, c, kFast), InputError);  // 3 heads on 2 kv heads
  EXPECT_THROW(tt_sdpa_decode(q, k, k, {5, 5}, nullptr, config(64, MathFidelity::HiFi2, false, true, 1, 1), kFast),
               InputError);  // batch 2 on one core
}

// update_cache writes one row through the packer and re-packs its tile:
// every other row keeps its bits; the new row is what the packer makes of
// the bf16 input (for bfloat8_b: the Bfp8_b pack source, not the host encoder).
TEST(TtsimKvCache, UpdateRewritesOneRowThroughThePacker) {
  for (const DataFormat f : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    TileTensor cache = randn_tile({2, 2, 96, 64}, f, 21);
    const TileTensor before = cache;
    const TileTensor x = randn_tile({1, 2, 8, 64}, DataFormat::Bfloat16, 22, 3.0f);
    tt_update_cache(cache, x, 37, 3, CacheWriteConfig{});  // cache user u takes input row 3 + u
    for (int64_t m = 0; m < 4; ++m)
      for (int64_t r = 0; r < 96; ++r) {
        const int64_t user = m / 2, head = m % 2;
        std::vector<float> want(before.matrix(m) + r * 64, before.matrix(m) + (r + 1) * 64);
        if (r == 37) pack_from_dst(x.matrix(head) + (3 + user) * 64, want.data(), 64, f, false, false);
        EXPECT_EQ(0, std::memcmp(want.data(), cache.matrix(m) + r * 64, 64 * 4)) << format_name(f) << " m" << m << " r" << r;
      }
  }
  // The packer's Bfp8_b source rounds a tie half up, the host encoder to
  // even: 1 + 2^-7 (a bf16 value, one bit below bfp8's step) splits them.
  float row[16] = {1.0f, 0.0f};
  row[1] = 1.0f + 1.0f / 128.0f;  // host bfp8: 1.0; packer: 1.015625
  TileTensor cache = make_tile_tensor({1, 1, 32, 32}, DataFormat::Bfp8_b);
  TileTensor x = make_tile_tensor({1, 1, 1, 32}, DataFormat::Bfloat16);
  for (int i = 0; i < 16; ++i) x.at(0, 0, i) = row[i];
  tt_update_cache(cache, x, 0, 0, CacheWriteConfig{});
  float packed[16];
  pack_from_dst(row, packed, 16, DataFormat::Bfp8_b, false, false);
  EXPECT_EQ(cache.at(0, 0, 1), packed[1]);
  EXPECT_EQ(cache.at(0, 0, 1), 1.015625f);
  EXPECT_EQ(to_tile_layout(row, {1, 16}, DataFormat::Bfp8_b).at(0, 0, 1), 1.0f);  // what from_torch would store
}

TEST(TtsimKvCache, PagedUpdateFollowsThePageTable) {
  TileTensor cache = make_tile_tensor({4, 2, 32, 32}, DataFormat::Bfloat16);  // 4 blocks of 32 positions
  const TileTensor x = randn_tile({1, 2, 8, 32}, DataFormat::Bfloat16, 31);   // 2 users, 8 (padded) heads
  const std::vector<std::vector<int64_t>> table = {{3, 1}, {0, 2}};
  tt_paged_update_cache(cache, x, {40, -1}, &table, CacheWriteConfig{});  // user 0: block 1, row 8; user 1 skipped
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(cache.at(1 * 2 + h, 8, d), x.at(0, h, d));
  double others = 0;
  for (float v : cache.data) others += std::fabs(v);
  double written = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 32; ++d) written += std::fabs(x.at(0, h, d));
  EXPECT_DOUBLE_EQ(others, written);  // nothing else was written
  EXPECT_THROW(tt_paged_update_cache(cache, x, {64, 0}, &table, CacheWriteConfig{}), InputError);
}

TEST(TtsimKvCache, FillCopiesTilesOfTheSameDtype) {
  TileTensor cache = make_tile_tensor({2, 2, 128, 32}, DataFormat::Bfp8_b);
  const TileTensor x = randn_tile({1, 2, 64, 32}, DataFormat::Bfp8_b, 41);
  tt_fill_cache(cache, x, 1, 32, CacheWriteConfig{});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 64; ++r)
      EXPECT_EQ(0, std::memcmp(cache.matrix(2 + h) + (32 + r) * 32, x.matrix(h) + r * 32, 32 * 4));
  EXPECT_THROW(tt_fill_cache(cache, randn_tile({1, 2, 64, 32}, DataFormat::Bfloat16, 1), 0, 0, CacheWriteConfig{}), InputError);
  EXPECT_THROW(tt_fill_cache(cache, x, 2, 0, CacheWriteConfig{}), InputError);
  EXPECT_THROW(tt_fill_cache(cache, x, 0, 16, CacheWriteConfig{}), InputError);  // not whole tiles
  EXPECT_THROW(tt_fill_cache(cache, x, 0, 96, CacheWriteConfig{}), InputError);  // past the cache
}

// paged_fill_cache: whole input tiles, padding rows included, land in the
// pages user batch_idx's table row names; other blocks keep their bits.
TEST(TtsimKvCache, PagedFillCopiesTilesThroughThePageTable) {
  const TileTensor before = randn_tile({6, 2, 64, 32}, DataFormat::Bfp8_b, 42);
  TileTensor cache = before;
  const TileTensor x = randn_tile({1, 2, 80, 32}, DataFormat::Bfp8_b, 43);  // 80 rows: 3 tiles
  const std::vector<std::vector<int64_t>> table = {{0, 1}, {4, 2}};
  tt_paged_fill_cache(cache, x, table, 1);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 96; ++r)  // the third tile's padding rows too
      EXPECT_EQ(0, std::memcmp(cache.matrix((r < 64 ? 4 : 2) * 2 + h) + (r % 64) * 32, x.matrix(h) + r * 32, 32 * 4))
          << r;
  for (int64_t blk : {0, 1, 3, 5})
    for (int64_t h = 0; h < 2; ++h)
      EXPECT_EQ(0, std::memcmp(cache.matrix(blk * 2 + h), before.matrix(blk * 2 + h), 64 * 32 * 4));
  for (int64_t r = 32; r < 64; ++r)  // block 2's second tile: untouched
    EXPECT_EQ(0, std::memcmp(cache.matrix(2 * 2) + r * 32, before.matrix(2 * 2) + r * 32, 32 * 4));
  EXPECT_THROW(tt_paged_fill_cache(cache, randn_tile({1, 2, 80, 32}, DataFormat::Bfloat16, 1), table, 1), InputError);
  EXPECT_THROW(tt_paged_fill_cache(cache, x, table, 2), InputError);                          // no such user
  EXPECT_THROW(tt_paged_fill_cache(cache, x, {{0}, {1}}, 0), InputError);                      // one page: too short
  EXPECT_THROW(tt_paged_fill_cache(cache, x, {{0, 9}, {1, 2}}, 0), InputError);                // no block 9
  TileTensor odd = make_tile_tensor({6, 2, 16, 32}, DataFormat::Bfp8_b);
  EXPECT_THROW(tt_paged_fill_cache(odd, x, table, 0), InputError);                            // blocks of 16 rows
}

TEST(TtsimRotaryLlama, TransMatSwapsPairsExactlyAndVectorEqualsOracle) {
  const TileTensor t = rotary_llama_trans_mat(DataFormat::Bfloat16);
  EXPECT_EQ(t.at(0, 0, 1), 1.0f);
  EXPECT_EQ(t.at(0, 1, 0), -1.0f);
  EXPECT_EQ(t.at(0, 0, 0), 0.0f);
  // cos = 0, sin = 1 leaves x @ T: (x0, x1) -> (-x1, x0), exact at HiFi4.
  const TileTensor x = randn_tile({1, 2, 64, 64}, DataFormat::Bfloat16, 51);
  TileTensor zero = make_tile_tensor({1, 1, 64, 64}, DataFormat::Bfloat16), one = zero;
  for (float& v : one.data) v = 1.0f;
  ComputeConfig hifi4;
  hifi4.math_fidelity = MathFidelity::HiFi4;
  const TileTensor rot = tt_rotary_llama(x, zero, one, t, RotaryMode::Prefill, hifi4, kFast);
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 64; c += 2) {
      EXPECT_EQ(rot.at(1, r, c), -x.at(1, r, c + 1));
      EXPECT_EQ(rot.at(1, r, c + 1), x.at(1, r, c));
    }
  // Real tables: vector path = lane models, prefill and decode, two fidelities.
  const TileTensor cos = randn_tile({1, 1, 64, 64}, DataFormat::Bfloat16, 52), sin = randn_tile({1, 1, 64, 64}, DataFormat::Bfloat16, 53);
  for (const MathFidelity fid : {MathFidelity::HiFi4, MathFidelity::LoFi}) {
    ComputeConfig c;
    c.math_fidelity = fid;
    EXPECT_TRUE(same_bits(tt_rotary_llama(x, cos, sin, t, RotaryMode::Prefill, c, kFast),
                          tt_rotary_llama(x, cos, sin, t, RotaryMode::Prefill, c, kOracle)));
    const TileTensor xd = randn_tile({1, 3, 8, 64}, DataFormat::Bfloat16, 54);
    const TileTensor cd = randn_tile({1, 3, 1, 64}, DataFormat::Bfloat16, 55), sd = randn_tile({1, 3, 1, 64}, DataFormat::Bfloat16, 56);
    EXPECT_TRUE(same_bits(tt_rotary_llama(xd, cd, sd, t, RotaryMode::Decode, c, kFast),
                          tt_rotary_llama(xd, cd, sd, t, RotaryMode::Decode, c, kOracle)));
  }
}

// sliding_window_size and attention_sink (the decode kernel at 00d8eec3 has
// both): the chunk range starts at the window's chunk, the window's first
// chunk is masked below the window, the sinks join at the root. Vector path
// = lane models bit for bit (windows inside one chunk, across chunks and
// cores, longer than cur_pos; sinks small and dominant), and close to
// float64 attention over the window with the sink in the denominator.
TEST(TtsimSdpaDecode, SlidingWindowAndSinkMatchOracleAndFloat64) {
  std::vector<DecodeCase> cases = {
      {"window in a chunk", 2, 4, 1, 512, 64, {100, 511}, config(64, MathFidelity::HiFi2, false, true, 8, 8)},
      {"window over cores", 1, 8, 2, 512, 32, {450}, config(32, MathFidelity::HiFi2, false, true, 3, 1)},
      {"window > cur_pos, fp32", 2, 4, 4, 256, 64, {20, 255}, config(32, MathFidelity::HiFi4, true, false, 8, 8)},
  };
  const int64_t windows[] = {40, 200, 128};
  for (size_t i = 0; i < cases.size(); ++i) cases[i].cfg.sliding_window_size = windows[i];
  DecodeCase sink{"sink", 2, 4, 2, 256, 64, {3, 200}, config(64, MathFidelity::HiFi2, false, true, 8, 8)};
  sink.cfg.attention_sink = {0.5f, 4.0f, -2.0f, 40.0f};
  cases.push_back(sink);
  DecodeCase both{"window and sink", 1, 4, 1, 512, 64, {300}, config(32, MathFidelity::HiFi2, false, false, 4, 1)};
  both.cfg.sliding_window_size = 100;
  both.cfg.attention_sink = {1.0f, 2.0f, 3.0f, 20.0f};
  cases.push_back(both);
  for (const DecodeCase& dc : cases) {
    const TileTensor q = randn_tile({1, dc.b, dc.nh, dc.dh}, DataFormat::Bfloat16, 21);
    const TileTensor k = randn_tile({dc.b, dc.nkv, dc.S, dc.dh}, dc.kv_format, 22);
    const TileTensor v = randn_tile({dc.b, dc.nkv, dc.S, dc.dh}, dc.kv_format, 23);
    const TileTensor oracle = tt_sdpa_decode(q, k, v, dc.cur_pos, nullptr, dc.cfg, kOracle);
    EXPECT_TRUE(same_bits(tt_sdpa_decode(q, k, v, dc.cur_pos, nullptr, dc.cfg, kFast), oracle)) << dc.name;
    for (int64_t b = 0; b < dc.b; ++b)
      for (int64_t h = 0; h < dc.nh; ++h) {
        const float* s = dc.cfg.attention_sink.empty() ? nullptr : &dc.cfg.attention_sink[static_cast<size_t>(h)];
        const std::vector<double> ref =
            reference_row(q, k, v, b, h, dc.cur_pos[static_cast<size_t>(b)], dc.cfg.sliding_window_size, s);
        std::vector<double> got(ref.size());
        for (size_t d = 0; d < got.size(); ++d) got[d] = oracle.at(b, h, static_cast<int64_t>(d));
        EXPECT_GT(pcc(ref, got), 0.98) << dc.name << " b" << b << " h" << h;
      }
  }
  // The window matters: without it the output differs.
  SdpaDecodeConfig nowin = cases[0].cfg;
  nowin.sliding_window_size = 0;
  const TileTensor q = randn_tile({1, 2, 4, 64}, DataFormat::Bfloat16, 21);
  const TileTensor k = randn_tile({2, 1, 512, 64}, DataFormat::Bfloat16, 22);
  const TileTensor v = randn_tile({2, 1, 512, 64}, DataFormat::Bfloat16, 23);
  EXPECT_FALSE(same_bits(tt_sdpa_decode(q, k, v, {100, 511}, nullptr, nowin, kOracle),
                         tt_sdpa_decode(q, k, v, {100, 511}, nullptr, cases[0].cfg, kOracle)));
}
