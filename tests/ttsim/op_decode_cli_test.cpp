// `mha op` for the decode-time ops (sdpa-decode, update-cache, fill-cache,
// rotary-llama): bit for bit against the numeric core called directly, the
// flags that spell the ops' params, and their exit-2 errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/tensor_file.h"
#include "support/test_support.h"
#include "backends/ttsim/ops/kv_cache/kv_cache_kernel.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"
#include "ttsim/tile.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

struct OpFiles {
  TempDir dir;
  std::string in(const std::string& name, const Tensor& t) {
    io::write_npy(dir.file(name), t);
    return shell_quote(dir.file(name));
  }
  Tensor op(const std::string& args) {
    CommandResult r = run_mha("op " + args + " -o " + shell_quote(dir.file("out.npy")));
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return io::read_tensor(dir.file("out.npy"));
  }
};

}  // namespace

// At tt_metal 2024 (sdpa_decode_latest_test.cpp has latest's).
TEST(OpDecodeCli, SdpaDecodeBitForBitWithTheCore) {
  OpFiles r;
  SdpaDecodeConfig at2024;
  at2024.compute.tt_metal = TtMetal::R2024;
  const Tensor q = randn({1, 2, 8, 64}, 1), k = randn({2, 2, 512, 64}, 2), v = randn({2, 2, 512, 64}, 3);
  const std::string qi = r.in("q.npy", q), ki = r.in("k.npy", k), vi = r.in("v.npy", v);
  // Defaults: bf16, HiFi2, approx on, k_chunk_size 512 (largest power of 2 dividing 512), 8x8 grid.
  const TileTensor tq = to_tile_layout(q, DataFormat::Bfloat16), tk = to_tile_layout(k, DataFormat::Bfloat16),
                   tv = to_tile_layout(v, DataFormat::Bfloat16);
  EXPECT_TRUE(same_bits(r.op("sdpa-decode " + qi + " " + ki + " " + vi + " --cur-pos 7,300 --option tt_metal=2024"),
                        tt_sdpa_decode(tq, tk, tv, {7, 300}, nullptr, at2024)));
  // Program config keys and a bfloat8_b cache.
  SdpaDecodeConfig c = at2024;
  c.k_chunk_size = 64;
  c.exp_approx_mode = false;
  c.compute.math_fidelity = MathFidelity::HiFi4;
  c.compute.fp32_dest_acc_en = true;
  c.grid_y = 2;
  c.grid_x = 3;
  const TileTensor k8 = to_tile_layout(k, DataFormat::Bfp8_b), v8 = to_tile_layout(v, DataFormat::Bfp8_b);
  EXPECT_TRUE(same_bits(r.op("sdpa-decode " + qi + " " + ki + " " + vi +
                             " --cur-pos 511,64 --in1-dtype bfloat8_b --in2-dtype bfloat8_b --math-fidelity HiFi4 "
                             "--fp32-dest-acc-en --option k_chunk_size=64 --option exp_approx_mode=false "
                             "--option core_grid=[2,3] --option threads=2 --option tt_metal=2024"),
                        tt_sdpa_decode(tq, k8, v8, {511, 64}, nullptr, c)));
  // Paged: blocks [4, 2, 256, 64] with an int32 page table.
  const Tensor kp = randn({4, 2, 256, 64}, 4), vp = randn({4, 2, 256, 64}, 5);
  Tensor table(DType::I32, {2, 2});  // as torch saves an int32 table
  const int32_t ids[4] = {3, 1, 0, 2};
  std::memcpy(table.data<int32_t>(), ids, sizeof ids);
  const std::vector<std::vector<int64_t>> pt = {{3, 1}, {0, 2}};
  EXPECT_TRUE(same_bits(r.op("sdpa-decode " + qi + " " + r.in("kp.npy", kp) + " " + r.in("vp.npy", vp) +
                             " --cur-pos 300,511 --option tt_metal=2024 --page-table " + r.in("t.npy", table)),
                        tt_sdpa_decode(tq, to_tile_layout(kp, DataFormat::Bfloat16), to_tile_layout(vp, DataFormat::Bfloat16),
                                       {300, 511}, &pt, at2024)));
}

// sliding_window_size and attention_sink (held as bf16: 0.3 -> 0.30078125),
// at tt_metal 2024.
TEST(OpDecodeCli, SdpaDecodeWindowAndSinkBitForBitWithTheCore) {
  OpFiles r;
  const Tensor q = randn({1, 2, 8, 64}, 1), k = randn({2, 2, 512, 64}, 2), v = randn({2, 2, 512, 64}, 3);
  const TileTensor tq = to_tile_layout(q, DataFormat::Bfloat16), tk = to_tile_layout(k, DataFormat::Bfloat16),
                   tv = to_tile_layout(v, DataFormat::Bfloat16);
  SdpaDecodeConfig c;
  c.compute.tt_metal = TtMetal::R2024;
  c.sliding_window_size = 100;
  c.attention_sink = {0.30078125f, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_TRUE(same_bits(r.op("sdpa-decode " + r.in("q.npy", q) + " " + r.in("k.npy", k) + " " + r.in("v.npy", v) +
                             " --cur-pos 7,300 --option tt_metal=2024 --option sliding_window_size=100 "
                             "--option 'attention_sink=[0.3,1,2,3,4,5,6,7]'"),
                        tt_sdpa_decode(tq, tk, tv, {7, 300}, nullptr, c)));
}

TEST(OpDecodeCli, CacheOpsWriteTheCacheInItsDtype) {
  OpFiles r;
  const Tensor cache = randn({4, 2, 64, 64}, 6), x = randn({1, 2, 32, 64}, 7);
  const std::string ci = r.in("c.npy", cache), xi = r.in("x.npy", x);
  TileTensor want = to_tile_layout(cache, DataFormat::Bfp8_b);
  tt_update_cache(want, to_tile_layout(x, DataFormat::Bfloat16), 33, 5, CacheWriteConfig{});
  EXPECT_TRUE(same_bits(r.op("update-cache " + ci + " " + xi + " --update-idx 33 --batch-offset 5 --in0-dtype bfloat8_b"),
                        want));
  // paged_update_cache through a page table; user 1 skipped.
  const Tensor xp = randn({1, 2, 8, 64}, 8);
  Tensor table(DType::I32, {2, 2});  // as torch saves an int32 table
  const int32_t table_ids[4] = {2, 0, 1, 3};
  std::memcpy(table.data<int32_t>(), table_ids, sizeof table_ids);
  const std::vector<std::vector<int64_t>> pt = {{2, 0}, {1, 3}};
  TileTensor want2 = to_tile_layout(cache, DataFormat::Bfloat16);
  tt_paged_update_cache(want2, to_tile_layout(xp, DataFormat::Bfloat16), {70, -1}, &pt, CacheWriteConfig{});
  EXPECT_TRUE(same_bits(r.op("update-cache " + ci + " " + r.in("xp.npy", xp) + " --cur-pos 70,-1 --page-table " +
                             r.in("t.npy", table)),
                        want2));
  TileTensor want3 = to_tile_layout(cache, DataFormat::Bfloat16);
  tt_fill_cache(want3, to_tile_layout(x, DataFormat::Bfloat16), 3, 32, CacheWriteConfig{});
  EXPECT_TRUE(same_bits(r.op("fill-cache " + ci + " " + xi + " --batch-idx 3 --update-idx 32"), want3));
  // paged_fill_cache: user 1's pages 3 and 1 (blocks of 64 rows).
  const Tensor xf = randn({1, 2, 100, 64}, 9);
  const std::vector<std::vector<int64_t>> ft = {{0, 2}, {3, 1}};
  TileTensor want4 = to_tile_layout(cache, DataFormat::Bfloat16);
  tt_paged_fill_cache(want4, to_tile_layout(xf, DataFormat::Bfloat16), ft, 1);
  Tensor ftable(DType::I32, {2, 2});
  const int32_t ft_ids[4] = {0, 2, 3, 1};
  std::memcpy(ftable.data<int32_t>(), ft_ids, sizeof ft_ids);
  EXPECT_TRUE(same_bits(r.op("paged-fill-cache " + ci + " " + r.in("xf.npy", xf) + " --batch-idx 1 --page-table " +
                             r.in("ft.npy", ftable)),
                        want4));
}

TEST(OpDecodeCli, RotaryBuildsTheTransformationTileWhenOmitted) {
  OpFiles r;
  const Tensor x = randn({1, 4, 64, 64}, 9), cos = randn({1, 1, 64, 64}, 10), sin = randn({1, 1, 64, 64}, 11);
  const std::string xi = r.in("x.npy", x), ci = r.in("c.npy", cos), si = r.in("s.npy", sin);
  ComputeConfig c;
  c.math_fidelity = MathFidelity::HiFi4;
  const TileTensor want = tt_rotary_llama(to_tile_layout(x, DataFormat::Bfloat16), to_tile_layout(cos, DataFormat::Bfloat16),
                                          to_tile_layout(sin, DataFormat::Bfloat16),
                                          rotary_llama_trans_mat(DataFormat::Bfloat16), RotaryMode::Prefill, c);
  EXPECT_TRUE(same_bits(r.op("rotary-llama " + xi + " " + ci + " " + si), want));
  const Tensor t = to_tensor(rotary_llama_trans_mat(DataFormat::Bfloat16));
  EXPECT_TRUE(same_bits(r.op("rotary-llama " + xi + " " + ci + " " + si + " " + r.in("t.npy", t)), want));
}

TEST(OpDecodeCli, ErrorsAreOneLineExit2AndWriteNothing) {
  TempDir dir;
  auto in = [&](const std::string& name, const Tensor& t) {
    io::write_npy(dir.file(name), t);
    return shell_quote(dir.file(name)) + " ";
  };
  const std::string q = in("q.npy", randn({1, 2, 4, 64}, 1)), k = in("k.npy", randn({2, 1, 256, 64}, 2));
  const std::string c = in("c.npy", randn({2, 1, 64, 64}, 3)), x = in("x.npy", randn({1, 1, 32, 64}, 4));
  const std::string x2 = in("x2.npy", randn({1, 1, 2, 64}, 4));
  const std::string float_table = in("ft.npy", Tensor::from_f32({2, 1}, {0.0f, 1.0f}));
  Tensor ids(DType::I32, {2, 1}), bad_ids(DType::I32, {2, 1});
  ids.data<int32_t>()[0] = 0, ids.data<int32_t>()[1] = 1;
  bad_ids.data<int32_t>()[0] = -1, bad_ids.data<int32_t>()[1] = 1;
  const std::string table = in("t.npy", ids), bad_table = in("bt.npy", bad_ids);
  const std::string out = " -o " + shell_quote(dir.file("o.npy"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sdpa-decode " + q + k + k + out, "sdpa-decode: --cur-pos P,... (the cur_pos param) is required"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1", "expected 2 cur_pos values (one per user), found 1"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,256", "cur_pos[1] = 256, expected [0, 256)"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,x", "--cur-pos: expected comma-separated positions"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --option k_chunk_size=96",
       "op options.k_chunk_size: expected 0 (TT-NN's default) or a power of 2"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --page-table " + bad_table,
       "expected block ids (non-negative integers), found -1 at [0, 0]"},
      // A float table is not taken as block ids (TT-NN's page_table is int32).
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --page-table " + float_table,
       "expected an integer page table (TT-NN's is int32), found float32"},
      // ttnn.update_cache's users are the input's: 5 + 2 cache users past its 2.
      {"update-cache " + c + x2 + out + " --update-idx 3 --batch-offset 5",
       "update_cache: batch_offset 5 + 2 cache users passes the input's 2 users"},
      {"sdpa-decode " + q + k + out + " --cur-pos 1,2", "sdpa-decode: expected inputs Q K V [MASK], found 2 inputs"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --option sliding_window_size=-1",
       "op options.sliding_window_size: expected 0 (none) or a positive number"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --option attention_sink=[1,2]",
       "sdpa_decode: attention_sink has 2 values, expected one per q head (4)"},
      {"sdpa-decode " + q + k + k + out + " --cur-pos 1,2 --in1-dtype float32", "sdpa_decode: K is float32; expected"},
      {"add " + q + q + out + " --cur-pos 1", "--cur-pos: add does not take it"},
      {"update-cache " + c + x + out, "update-cache: give --update-idx N (ttnn.update_cache) or --cur-pos P,..."},
      {"update-cache " + c + x + out + " --update-idx 64", "update_cache update_idx: expected a position in [0, 64)"},
      {"update-cache " + c + x + out + " --update-idx 3 --page-table " + table,
       "--page-table goes with --cur-pos"},
      {"fill-cache " + c + x + out + " --batch-idx 0 --dtype bfloat8_b --in1-dtype bfloat16",
       "fill_cache: input dtype bfloat16 differs from the cache's bfloat8_b"},
      {"fill-cache " + c + x + out, "fill-cache: --batch-idx N (the batch_idx param) is required"},
      {"rotary-llama " + x + x + out, "rotary-llama: expected inputs X COS SIN [TRANS], found 2 inputs"},
      {"rotary-llama " + x + c + c + out, "expected COS/SIN [1, 1 or nh, S, dh]"},
  };
  for (const auto& [args, needle] : cases) {
    CommandResult r = run_mha("op " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << args;
  }
}

// paged_fused_update_cache: both caches written as paged_update_cache
// writes each, stacked [2, ...]; caches of different dtypes are refused.
TEST(OpDecodeCli, PagedFusedUpdateCacheIsTwoPagedUpdates) {
  OpFiles r;
  const Tensor k = randn({4, 2, 64, 64}, 21), v = randn({4, 2, 64, 64}, 22);
  const Tensor xk = randn({1, 2, 8, 64}, 23), xv = randn({1, 2, 8, 64}, 24);
  Tensor table(DType::I32, {2, 2});
  const int32_t ids[4] = {2, 0, 1, 3};
  std::memcpy(table.data<int32_t>(), ids, sizeof ids);
  const std::vector<std::vector<int64_t>> pt = {{2, 0}, {1, 3}};
  CacheWriteConfig w;
  w.fp32_dest_acc_en = true;
  TileTensor wk = to_tile_layout(k, DataFormat::Bfp8_b), wv = to_tile_layout(v, DataFormat::Bfp8_b);
  tt_paged_update_cache(wk, to_tile_layout(xk, DataFormat::Bfloat16), {70, 5}, &pt, w);
  tt_paged_update_cache(wv, to_tile_layout(xv, DataFormat::Bfloat16), {70, 5}, &pt, w);
  const std::string args = "paged-fused-update-cache " + r.in("k.npy", k) + " " + r.in("xk.npy", xk) + " " +
                           r.in("v.npy", v) + " " + r.in("xv.npy", xv) + " --cur-pos 70,5 --page-table " +
                           r.in("t.npy", table) + " --in0-dtype bfloat8_b --in2-dtype bfloat8_b --fp32-dest-acc-en";
  const Tensor got = r.op(args);
  ASSERT_EQ(got.shape(), (Shape{2, 4, 2, 64, 64}));
  const Tensor want_k = to_tensor(wk), want_v = to_tensor(wv);
  EXPECT_EQ(0, std::memcmp(got.data<float>(), want_k.data<float>(), want_k.numel() * 4));
  EXPECT_EQ(0, std::memcmp(got.data<float>() + want_k.numel(), want_v.data<float>(), want_v.numel() * 4));
  CommandResult bad = run_mha("op paged-fused-update-cache " + r.in("k.npy", k) + " " + r.in("xk.npy", xk) + " " +
                              r.in("v.npy", v) + " " + r.in("xv.npy", xv) + " --cur-pos 70,5 --in0-dtype bfloat8_b -o " +
                              shell_quote(r.dir.file("bad.npy")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("the program takes cache1's shape and dtype for both"), std::string::npos) << bad.err;
}

// rotary_embedding_llama_fused_qk: Q's and K's decode rotations in one op,
// the heads concatenated, bit for bit with the lane models' rotary_llama on
// each (the op runs the vector kernels, 1 and 3 threads), across dtypes,
// fidelities and Dst modes.
TEST(OpDecodeCli, RotaryFusedQkIsRotaryDecodeOnQAndK) {
  OpFiles r;
  const Tensor q = randn({1, 3, 8, 128}, 31), k = randn({1, 3, 2, 128}, 32);
  const Tensor cos = randn({1, 3, 1, 128}, 33), sin = randn({1, 3, 1, 128}, 34);
  const std::string in = r.in("q.npy", q) + " " + r.in("k.npy", k) + " " + r.in("c.npy", cos) + " " + r.in("s.npy", sin);
  const Exec oracle{simd::Isa::Scalar, nullptr};
  struct Cfg {
    const char* flags;
    DataFormat x;
    MathFidelity fid;
    bool fp32;
  };
  for (const Cfg& cf : {Cfg{"", DataFormat::Bfloat16, MathFidelity::HiFi4, false},
                        Cfg{" --option threads=3", DataFormat::Bfloat16, MathFidelity::HiFi4, false},
                        Cfg{" --in0-dtype bfloat8_b --in1-dtype bfloat8_b --math-fidelity HiFi2 --fp32-dest-acc-en",
                            DataFormat::Bfp8_b, MathFidelity::HiFi2, true}}) {
    ComputeConfig c;
    c.math_fidelity = cf.fid;
    c.fp32_dest_acc_en = cf.fp32;
    c.output = cf.x;
    const TileTensor tc = to_tile_layout(cos, DataFormat::Bfloat16), ts = to_tile_layout(sin, DataFormat::Bfloat16);
    const TileTensor T = rotary_llama_trans_mat(cf.x);
    const Tensor wq = to_tensor(tt_rotary_llama(to_tile_layout(q, cf.x), tc, ts, T, RotaryMode::Decode, c, oracle));
    const Tensor wk = to_tensor(tt_rotary_llama(to_tile_layout(k, cf.x), tc, ts, T, RotaryMode::Decode, c, oracle));
    const Tensor got = r.op("rotary-llama-fused-qk " + in + cf.flags);
    ASSERT_EQ(got.shape(), (Shape{1, 3, 10, 128})) << cf.flags;
    for (int64_t u = 0; u < 3; ++u) {
      EXPECT_EQ(0, std::memcmp(got.data<float>() + u * 10 * 128, wq.data<float>() + u * 8 * 128, 8 * 128 * 4))
          << cf.flags << " user " << u;
      EXPECT_EQ(0, std::memcmp(got.data<float>() + (u * 10 + 8) * 128, wk.data<float>() + u * 2 * 128, 2 * 128 * 4))
          << cf.flags << " user " << u;
    }
  }
  CommandResult bad = run_mha("op rotary-llama-fused-qk " + in + " --in1-dtype bfloat8_b -o " +
                              shell_quote(r.dir.file("bad.npy")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("the program takes Q's dtype for K's buffers"), std::string::npos) << bad.err;
}
