// `mpirun -np N mha run` with "parallel": {"sequence": N} (ring attention)
// against the one-process reference-backend run on random shapes: 1 to 4
// ranks, causal (zigzag) and not, GQA, sliding window, rope (llama_attention),
// torch_mha and mha_causal. The ring merges softmax blocks in another order
// than one process, so the documented equality is a tolerance (docs/CONFIG.md):
// reference |d| <= 1e-12 + 1e-10 |want|, cpu |d| <= 2e-6 + 1e-5 |want|.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "io/tensor_file.h"
#include "parallel/ring.h"
#include "parallel/world.h"
#include "mpirun_support.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

using test::mpirun;

// `body` is a config without "backend" / "parallel"; runs it on one process
// and on `ranks` ranks and checks the documented tolerance.
void expect_ring_matches(const std::string& body, int ranks, const std::string& what) {
  test::TempDir dir;
  for (const std::string backend : {"reference", "cpu"}) {
    const std::string one = dir.file("one.json"), many = dir.file("many.json");
    const std::string head = body.substr(0, body.rfind('}'));
    test::write_text(one, head + R"(, "backend": ")" + backend + R"(", "runs": {"iterations": 1}})");
    test::write_text(many, head + R"(, "backend": ")" + backend + R"(", "runs": {"iterations": 1}, "parallel": {"sequence": )" +
                               std::to_string(ranks) + "}}");
    auto r1 = test::run_mha("run -c " + one + " -o " + dir.file("one.npy"));
    ASSERT_EQ(r1.exit_code, 0) << what << ": " << r1.err;
    auto rn = test::run_command(mpirun(ranks) + MHA_BINARY + " run -c " + many + " -o " + dir.file("many.npy") +
                                " --json " + dir.file("r.json"));
    ASSERT_EQ(rn.exit_code, 0) << what << " " << backend << " " << ranks << " ranks: " << rn.err;
    const Tensor a = io::read_tensor(dir.file("one.npy")), b = io::read_tensor(dir.file("many.npy"));
    const double atol = backend == "reference" ? 1e-12 : 2e-6, rtol = backend == "reference" ? 1e-10 : 1e-5;
    EXPECT_TRUE(test::tensors_close(b, a, atol, rtol)) << what << " " << backend << " " << ranks << " ranks";
    const auto rep = nlohmann::json::parse(test::read_text(dir.file("r.json")));
    const auto& p = rep["backend_info"]["parallel"];
    EXPECT_EQ(p["mode"], "sequence");
    EXPECT_EQ(p["ranks"], ranks);
    ASSERT_EQ(p["bytes_sent_per_rank"].size(), static_cast<std::size_t>(ranks));
    if (ranks > 1) {
      EXPECT_GT(p["bytes_sent_per_rank"][ranks - 1].get<int64_t>(), 0) << "no K/V block travelled";
    }
  }
}

TEST(Ring, ChunksAreZigzagForCausalRuns) {
  using C = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(parallel::ring_chunks(12, 1, 3, false), (C{{4, 4}}));
  EXPECT_EQ(parallel::ring_chunks(12, 0, 3, true), (C{{0, 2}, {10, 2}}));
  EXPECT_EQ(parallel::ring_chunks(12, 2, 3, true), (C{{4, 2}, {6, 2}}));
  EXPECT_THROW(parallel::ring_chunks(10, 0, 3, true), InputError);
}

TEST(Ring, LlamaRandomShapesMatchOneProcess) {
  REQUIRE_MPI();
  std::mt19937 rng(13);
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const int kv = 1 + rng() % 3, group = 1 + rng() % 3, dh = 2 * (2 + rng() % 4);
    const int L = 2 * ranks * (1 + rng() % 5), B = 1 + rng() % 2;
    const bool window = ranks % 2 == 0;
    const std::string body = R"({"variant": "llama_attention", "params": {"hidden_size": )" + std::to_string(kv * group * dh) +
                             R"(, "num_attention_heads": )" + std::to_string(kv * group) + R"(, "num_key_value_heads": )" +
                             std::to_string(kv) + R"(, "head_dim": )" + std::to_string(dh) + R"(, "attention_bias": true)" +
                             (window ? R"(, "sliding_window": 3)" : "") +
                             R"(}, "weights": {"init": "torch", "seed": )" + std::to_string(ranks) +
                             R"(}, "inputs": {"seed": 6, "x": {"randn": [)" + std::to_string(B) + ", " + std::to_string(L) +
                             ", " + std::to_string(kv * group * dh) + "]}}}";
    expect_ring_matches(body, ranks, "llama L=" + std::to_string(L) + (window ? " window 3" : ""));
  }
}

TEST(Ring, TorchMhaAndMhaCausalMatchOneProcess) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string x = dir.file("x.npy");
  Tensor t(DType::F32, {10, 2, 12});  // torch_mha: [L, B, E]
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
  io::write_npy(x, t);
  for (int ranks = 1; ranks <= 4; ranks += (ranks == 1 ? 1 : 3)) {
    if (10 % ranks) continue;
    expect_ring_matches(R"({"variant": "torch_mha", "params": {"embed_dim": 12, "num_heads": 3},
      "weights": {"init": "torch", "seed": 2}, "inputs": {"query": ")" + x + R"(", "key": ")" + x +
                            R"(", "value": ")" + x + R"("}, "options": {"need_weights": false}})",
                        ranks, "torch_mha");
  }
  for (int ranks = 1; ranks <= 4; ++ranks)
    expect_ring_matches(R"({"variant": "mha_causal", "params": {"d_in": 12, "d_out": 16, "context_length": 64, "num_heads": 4},
      "weights": {"init": "torch", "seed": 3}, "inputs": {"seed": 4, "x": {"randn": [2, )" +
                            std::to_string(2 * ranks * 3) + ", 12]}}}",
                        ranks, "mha_causal");
}

TEST(Ring, RefusalsAreOneLine) {
  REQUIRE_MPI();
  test::TempDir dir;
  const std::string f = dir.file("c.json");
  auto run = [&](const std::string& cfg, int ranks) {
    test::write_text(f, cfg);
    return test::run_command(mpirun(ranks) + MHA_BINARY + " run -c " + f + " -o " + dir.file("o.npy"));
  };
  // Different key and value data: not self-attention.
  auto r = run(R"({"variant": "torch_mha", "params": {"embed_dim": 8, "num_heads": 2},
    "inputs": {"query": {"randn": [4, 1, 8]}, "key": {"randn": [4, 1, 8]}, "value": {"randn": [4, 1, 8]}},
    "options": {"need_weights": false}, "parallel": {"sequence": 2}})", 2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.sequence: ring attention is self-attention: query, key and value must be the same tensor\n");
  const std::string llama = R"({"variant": "llama_attention", "params": {"hidden_size": 16, "num_attention_heads": 2},
    "inputs": {"x": {"randn": [1, 6, 16]}}, "parallel": {"sequence": 2}})";
  r = run(llama, 2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.sequence: 6 tokens do not split into 4 equal chunks (a causal ring takes 2 per rank)\n");
  r = run(llama, 3);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.sequence: the config asks for 2 ranks, but mha runs on 3 (start it with mpirun -np 2)\n");
  std::string tt = llama;
  tt.replace(tt.find("\"parallel\""), 0, "\"backend\": \"tt-sim\", ");
  r = run(tt, 2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mha: error: parallel.sequence: backend tt-sim cannot run ring attention (no partial attention)\n");
  EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << "an output was written";
  r = run(R"({"variant": "llama_attention", "params": {"hidden_size": 16, "num_attention_heads": 2},
    "inputs": {"x": {"randn": [1, 8, 16]}}, "parallel": {"sequence": 2, "heads": 2}})", 2);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected {\"heads\": RANKS} or {\"sequence\": RANKS}"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mha
