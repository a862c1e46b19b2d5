// tt-sim across MPI ranks: head-parallel `mha run` on tt-sim's SDPA
// pipeline, and `mha op sdpa` / `sdpa-decode` split by heads, each against
// one process byte for byte at 2 and 3 ranks (a paged decode at 2 and 4);
// bad requests end every rank with one line from rank 0 and exit code 2, and
// write nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "io/tensor_file.h"
#include "mpirun_support.h"
#include "support/test_support.h"

namespace mha {
namespace {

using test::mpirun;

// llama_attention on tt-sim (the SDPA pipeline: rope, GQA, bias); `parallel`
// is the config's "parallel" value, or "" for none.
std::string ttsim_llama(int64_t heads, int64_t kv, const std::string& parallel, const std::string& backend) {
  const std::string hidden = std::to_string(heads * 32);
  return R"({"variant": "llama_attention", "params": {"hidden_size": )" + hidden +
         R"(, "num_attention_heads": )" + std::to_string(heads) + R"(, "num_key_value_heads": )" +
         std::to_string(kv) + R"(, "head_dim": 32, "attention_bias": true},
    "weights": {"init": "torch", "seed": 5}, "inputs": {"seed": 6, "x": {"randn": [2, 45, )" + hidden +
         R"(]}}, "backend": )" + backend + (parallel.empty() ? "" : R"(, "parallel": )" + parallel) + "}";
}

// 2 ranks on 4 heads over 2 groups, 3 ranks on 6 over 3: the output file is
// the one-process run's (no "parallel" key), byte for byte.
TEST(TtSimRanks, HeadParallelMatchesOneProcess) {
  REQUIRE_MPI();
  test::TempDir dir;
  for (int ranks : {2, 3}) {
    const int64_t heads = 2 * ranks, kv = ranks;
    const std::string backend = R"({"name": "tt-sim", "threads": 1})";
    const std::string one = dir.file("one.json"), many = dir.file("many.json");
    test::write_text(one, ttsim_llama(heads, kv, "", backend));
    test::write_text(many, ttsim_llama(heads, kv, R"({"heads": )" + std::to_string(ranks) + "}", backend));
    auto r1 = test::run_mha("run -c " + one + " -o " + dir.file("one.npy"));
    ASSERT_EQ(r1.exit_code, 0) << r1.err;
    auto rn = test::run_command(mpirun(ranks) + MHA_BINARY + " run -c " + many + " -o " + dir.file("many.npy"));
    ASSERT_EQ(rn.exit_code, 0) << ranks << " ranks: " << rn.err;
    EXPECT_EQ(test::read_text(dir.file("one.npy")), test::read_text(dir.file("many.npy")))
        << ranks << " ranks: not bitwise equal";
  }
}

// torch_mha with is_causal (the SDPA pipeline's by default); `x` given: that
// file as query, key and value (self-attention), else three random tensors.
std::string ttsim_causal_mha(const std::string& x, const std::string& backend) {
  const std::string in = !x.empty() ? R"("query": ")" + x + R"(", "key": ")" + x + R"(", "value": ")" + x + "\""
                                    : R"("query": {"randn": [1, 40, 64]}, "key": {"randn": [1, 40, 64]},
                                "value": {"randn": [1, 40, 64]})";
  return R"({"variant": "torch_mha", "params": {"embed_dim": 64, "num_heads": 2, "batch_first": true},
    "inputs": {)" + in + R"(}, "options": {"need_weights": false, "is_causal": true},
    "backend": )" + backend + R"(, "parallel": {"heads": 2}})";
}

// Attention "ops" projects with TT-NN's width-dependent program choice: refused
// with one line, nothing written, whether the option or the inputs (separate
// query, key and value) choose it.
TEST(TtSimRanks, OpSequenceIsRefused) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string f = dir.file("c.json");
  const std::string why = "no separate output projection: TT-NN picks its projections' programs by their width, so a "
                          "share of the heads may round otherwise; attention \"sdpa\" has one";
  const std::string x = dir.file("x.npy");
  io::write_npy(x, test::randn({1, 40, 64}, 3));
  test::write_text(f, ttsim_causal_mha(x, R"({"name": "tt-sim", "attention": "ops"})"));
  auto r = test::run_command(mpirun(2) + MHA_BINARY + " run -c " + f + " -o " + dir.file("o.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.heads: backend tt-sim cannot run head-parallel (attention \"ops\" has " +
                       why + ")\n");
  test::write_text(f, ttsim_causal_mha("", R"({"name": "tt-sim"})"));
  r = test::run_command(mpirun(2) + MHA_BINARY + " run -c " + f + " -o " + dir.file("o.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: rank 0: tt-sim: head-parallel: these inputs run attention \"ops\", which has " + why + "\n");
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << "an output was written";
  // Self-attention runs.
  test::write_text(f, ttsim_causal_mha(x, R"({"name": "tt-sim"})"));
  r = test::run_command(mpirun(2) + MHA_BINARY + " run -c " + f + " -o " + dir.file("o.npy"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Writes Q, K, V for an op with `heads` query heads over `kv` groups.
void write_qkv(const test::TempDir& dir, const Shape& q, const Shape& kv, uint32_t seed) {
  io::write_npy(dir.file("q.npy"), test::randn(q, seed));
  io::write_npy(dir.file("k.npy"), test::randn(kv, seed + 1));
  io::write_npy(dir.file("v.npy"), test::randn(kv, seed + 2));
}

// `mha op ARGS` in one process and on `ranks` ranks: the same bytes.
void expect_op_ranks_equal(const test::TempDir& dir, const std::string& args, int ranks) {
  auto r1 = test::run_mha("op " + args + " -o " + dir.file("one.npy"));
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  auto rn = test::run_command(mpirun(ranks) + MHA_BINARY + " op " + args + " -o " + dir.file("many.npy") +
                              " --json " + dir.file("many.json"));
  ASSERT_EQ(rn.exit_code, 0) << ranks << " ranks: " << rn.err;
  EXPECT_EQ(test::read_text(dir.file("one.npy")), test::read_text(dir.file("many.npy")))
      << args << " on " << ranks << " ranks: not bitwise equal";
  const std::string json = test::read_text(dir.file("many.json"));
  EXPECT_NE(json.find("\"ranks\": " + std::to_string(ranks)), std::string::npos) << json;
}

TEST(TtSimRanks, SdpaOpSplitsHeads) {
  REQUIRE_MPI();
  test::TempDir dir;
  for (int ranks : {2, 3}) {
    write_qkv(dir, {2, 4 * ranks, 96, 64}, {2, ranks, 96, 64}, 10 + ranks);
    const std::string qkv = dir.file("q.npy") + " " + dir.file("k.npy") + " " + dir.file("v.npy");
    // The default (latest) and 2024's kernel.
    expect_op_ranks_equal(dir, "sdpa " + qkv + " --option q_chunk_size=32 --option k_chunk_size=32", ranks);
    expect_op_ranks_equal(dir, "sdpa " + qkv + " --option tt_metal=2024 --option q_chunk_size=32", ranks);
    expect_op_ranks_equal(dir, "sdpa " + qkv + " --option is_causal=false --dtype bfloat8_b", ranks);
    expect_op_ranks_equal(dir, "sdpa " + qkv + " --option tt_metal=latest --option fp32_dest_acc_en=true", ranks);
    // A mask per head and a sink per head: each rank takes its heads' own.
    io::write_npy(dir.file("m.npy"), test::randn({2, 4 * ranks, 96, 96}, 40 + ranks, 3.0f));
    expect_op_ranks_equal(dir, "sdpa " + qkv + " " + dir.file("m.npy") + " --option is_causal=false", ranks);
    std::string sinks = "[";
    for (int h = 0; h < 4 * ranks; ++h) sinks += (h ? "," : "") + std::to_string(0.25 * h - 1);
    expect_op_ranks_equal(dir, "sdpa " + qkv + " --option attention_sink=" + sinks + "]", ranks);
  }
}

TEST(TtSimRanks, SdpaDecodeOpSplitsHeads) {
  REQUIRE_MPI();
  test::TempDir dir;
  for (int ranks : {2, 3}) {
    write_qkv(dir, {1, 3, 2 * ranks, 64}, {3, ranks, 256, 64}, 20 + ranks);
    const std::string qkv = dir.file("q.npy") + " " + dir.file("k.npy") + " " + dir.file("v.npy");
    // k chunks of 32: up to 8 per user, dealt over several cores per head and
    // merged on the tree whose shape a share must keep.
    const std::string chunks = " --option k_chunk_size=32";
    expect_op_ranks_equal(dir, "sdpa-decode " + qkv + " --cur-pos 7,200,255" + chunks, ranks);
    expect_op_ranks_equal(dir, "sdpa-decode " + qkv + " --cur-pos 130,0,64 --option core_grid=[2,3]" + chunks, ranks);
    expect_op_ranks_equal(dir, "sdpa-decode " + qkv + " --cur-pos 255,31,100", ranks);
    // tt_metal latest: non-causal over the whole cache with a mask per head.
    io::write_npy(dir.file("m.npy"), test::randn({3, 1, 2 * ranks, 256}, 50 + ranks, 3.0f));
    expect_op_ranks_equal(dir, "sdpa-decode " + qkv + " " + dir.file("m.npy") +
                                   " --option tt_metal=latest --option is_causal=false" + chunks, ranks);
  }
}

// A paged cache [blocks, nkv, block_size, dh] through an int32 page table,
// at both tt_metal profiles: K/V split on axis 1 as an unpaged cache.
TEST(TtSimRanks, PagedSdpaDecodeOpSplitsHeads) {
  REQUIRE_MPI();
  test::TempDir dir;
  write_qkv(dir, {1, 2, 8, 64}, {8, 4, 64, 64}, 60);
  Tensor table(DType::I32, {2, 4});  // as torch saves an int32 table
  const int32_t ids[8] = {3, 1, 7, 0, 2, 5, 4, 6};
  std::memcpy(table.data<int32_t>(), ids, sizeof ids);
  io::write_npy(dir.file("t.npy"), table);
  const std::string qkv = dir.file("q.npy") + " " + dir.file("k.npy") + " " + dir.file("v.npy");
  for (const std::string profile : {"2024", "latest"})
    for (int ranks : {2, 4})
      expect_op_ranks_equal(dir, "sdpa-decode " + qkv + " --page-table " + dir.file("t.npy") +
                                     " --cur-pos 200,129 --option k_chunk_size=32 --option tt_metal=" + profile,
                            ranks);
}

// More ranks than key/value groups, an op that does not split, an op's own
// check: one line from rank 0, exit code 2 on every rank, no output.
TEST(TtSimRanks, BadRequestsAreOneLine) {
  REQUIRE_MPI();
  test::TempDir dir;
  write_qkv(dir, {1, 4, 64, 32}, {1, 2, 64, 32}, 30);
  const std::string qkv = dir.file("q.npy") + " " + dir.file("k.npy") + " " + dir.file("v.npy");
  const std::string out = " -o " + dir.file("o.npy");
  auto r = test::run_command(mpirun(3) + MHA_BINARY + " op sdpa " + qkv + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "mha: error: sdpa: 4 query heads over 2 key/value heads do not split into 3 ranks of whole key/value "
            "groups (the ranks must divide the key/value heads)\n");
  r = test::run_command(mpirun(2) + MHA_BINARY + " op softmax " + dir.file("q.npy") + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "mha: error: mha op softmax runs in one process: only sdpa and sdpa-decode split their heads across 2 "
            "MPI ranks (run it without mpirun)\n");
  r = test::run_command(mpirun(2) + MHA_BINARY + " op sdpa-decode " + qkv + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << "an output was written";
}

}  // namespace
}  // namespace mha
