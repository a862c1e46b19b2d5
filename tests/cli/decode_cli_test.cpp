// `mha run` with a "decode" section, end to end through the binary: the
// prefill + steps output against the same config without it, the timing
// report, and every refusal as one line with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

using namespace mha::test;

namespace {

CommandResult run_decode_config(const TempDir& dir, const std::string& config, const std::string& extra = "") {
  write_text(dir.file("c.json"), config);
  return run_mha("run -n 2 --config " + shell_quote(dir.file("c.json")) + " " + extra);
}

const char* kLlama =
    R"("variant": "llama_attention", "params": {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "rope_theta": 10000.0, "sliding_window": 7}, "weights": {"init": "torch", "seed": 2},
        "inputs": {"seed": 3, "x": {"randn": [2, 13, 32]}})";

std::string llama(const std::string& extra, const std::string& backend = "reference") {
  return std::string("{") + kLlama + R"(, "backend": ")" + backend + "\"" + extra + "}";
}

// max |a - b| and whether a and b are bitwise equal, by numpy.
std::string numpy_diff(const std::string& a, const std::string& b) {
  auto r = run_python("import numpy as np\na = np.load(" + shell_quote(a) + ").astype(np.float64)\nb = np.load(" +
                      shell_quote(b) + ").astype(np.float64)\nprint(a.shape == b.shape, np.array_equal(a, b), "
                      "float(np.abs(a - b).max()))\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

}  // namespace

TEST(DecodeCli, ShippedConfigReportsPhases) {
  TempDir dir;
  auto r = run_mha("run -n 2 --config " + shell_quote(source_dir() + "/configs/llama_decode.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode: prefill of 64 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32 steps: median"), std::string::npos) << r.out;
  // batch 1 x 2 KV heads x 96 tokens x (32 + 32) K and V values x 2 bytes
  EXPECT_NE(r.out.find("KV cache bfloat16, 24576 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode: KV cache bfloat16 error against a float64 decode of the same tokens: max abs "),
            std::string::npos) << r.out;
  auto j = run_mha("run -n 2 --json - --config " + shell_quote(source_dir() + "/configs/llama_decode.json"));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"tokens_per_s\""), std::string::npos);
  EXPECT_NE(j.out.find("\"step_median_ms\""), std::string::npos);
  const auto err = nlohmann::json::parse(j.out)["decode"]["cache_error"];
  // bfloat16 K and V: the output's relative error is of the order of 2^-9, far above float32's
  EXPECT_GT(err["rel_l2"].get<double>(), 1e-5) << err;
  EXPECT_LT(err["rel_l2"].get<double>(), 1e-2) << err;
  EXPECT_GT(err["max_abs"].get<double>(), 0) << err;
}

// Reference with a float32 cache: bitwise the one causal run; cpu: within float32 tolerances.
TEST(DecodeCli, LlamaEqualsOneCausalRun) {
  TempDir dir;
  for (const char* backend : {"reference", "cpu"}) {
    SCOPED_TRACE(backend);
    ASSERT_EQ(run_decode_config(dir, llama("", backend), "-o " + shell_quote(dir.file("full.npy"))).exit_code, 0);
    auto r = run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9})", backend),
                        "-o " + shell_quote(dir.file("dec.npy")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string d = numpy_diff(dir.file("full.npy"), dir.file("dec.npy"));
    if (std::string(backend) == "reference") {
      EXPECT_EQ(d.rfind("True True", 0), 0u) << d;
    }
    auto c = run_mha("compare " + shell_quote(dir.file("full.npy")) + " " + shell_quote(dir.file("dec.npy")));
    EXPECT_EQ(c.exit_code, 0) << c.out << d;
  }
}

TEST(DecodeCli, MhaCausalAndCausalTorchMha) {
  TempDir dir;
  const std::string book = R"({"variant": "mha_causal", "params": {"d_in": 3, "d_out": 4, "context_length": 6,
      "dropout": 0.0, "num_heads": 2}, "weights": {"init": "torch", "seed": 5}, "inputs": {"x": ")" +
                           data_file("your_journey_batch2.npy") + "\"}";
  ASSERT_EQ(run_decode_config(dir, book + "}", "-o " + shell_quote(dir.file("full.npy"))).exit_code, 0);
  auto r = run_decode_config(dir, book + R"(, "decode": {"prompt": 1, "tokens": 5}})", "-o " + shell_quote(dir.file("dec.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_mha("compare " + shell_quote(dir.file("full.npy")) + " " + shell_quote(dir.file("dec.npy"))).exit_code, 0);

  // torch_mha, sequence-first (batch_first false): the runner sees the canonical batch-first rows.
  const std::string torch = R"({"variant": "torch_mha", "params": {"embed_dim": 3, "num_heads": 1},
      "weights": {"init": "torch", "seed": 6}, "inputs": {"query": )" + std::string("\"") + data_file("your_journey_batch2.npy") +
                            R"(", "key": ")" + data_file("your_journey_batch2.npy") + R"(", "value": ")" +
                            data_file("your_journey_batch2.npy") + R"("}, "options": {"is_causal": true, "need_weights": false})";
  ASSERT_EQ(run_decode_config(dir, torch + "}", "-o " + shell_quote(dir.file("tfull.npy"))).exit_code, 0);
  // sequence-first [6, 2, 3]: the sequence is 2 long
  r = run_decode_config(dir, torch + R"(, "decode": {"prompt": 1, "tokens": 1, "cache_dtype": "float32"}})",
                 "-o " + shell_quote(dir.file("tdec.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_mha("compare " + shell_quote(dir.file("tfull.npy")) + " " + shell_quote(dir.file("tdec.npy"))).exit_code,
            0);
}

TEST(DecodeCli, RefusalsAreOneLine) {
  TempDir dir;
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 8})")),
                     "decode: the input has 13 tokens, expected prompt + tokens = 4 + 8 = 12");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 0, "tokens": 13})")), "decode.prompt");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"tokens": 13})")), "decode.prompt: required key is missing");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9, "cache_dtype": "q8_1"})")),
                     "decode.cache_dtype: expected one of float32, float16, bfloat16, q8_0, q4_0, bfloat8_b, bfloat4_b");
  // head_dim 8: no whole block of 32 (q4_0) or 16 (bfloat8_b) per row.
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9, "cache_dtype": "q4_0"})", "cpu")),
                     "decode: cache_dtype q4_0 needs head widths divisible by 32, found head_dim 8");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9, "cache_dtype": "bfloat8_b"})")),
                     "decode: cache_dtype bfloat8_b needs head widths divisible by 16, found head_dim 8");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9, "steps": 1})")),
                     "decode.steps: unknown key");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9})", "tt-sim")),
                     "backend tt-sim cannot decode variant llama_attention");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 4, "tokens": 9})"),
                                "--attn-weights " + shell_quote(dir.file("w.npy"))),
                     "--attn-weights: a decode run returns no attention weights");
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.npy")));
  // Non-causal, separate query/key/value and torch's need_weights default.
  const std::string q = data_file("your_journey_batch2.npy");
  auto torch = [&](const std::string& key, const std::string& options) {
    return R"({"variant": "torch_mha", "params": {"embed_dim": 3, "num_heads": 1}, "inputs": {"query": ")" + q +
           R"(", "key": ")" + key + R"(", "value": ")" + q + R"("}, "options": )" + options +
           R"(, "decode": {"prompt": 1, "tokens": 1}})";
  };
  expect_input_error(run_decode_config(dir, torch(q, R"({"need_weights": false})")),
                     "backend cpu cannot decode variant torch_mha: decode needs causal attention");
  auto r = run_python("import numpy as np\nx = np.load(" + shell_quote(q) + ")\nnp.save(" +
                      shell_quote(dir.file("k.npy")) + ", x + 1)\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_input_error(run_decode_config(dir, torch(dir.file("k.npy"), R"({"need_weights": false, "is_causal": true})")),
                     "decode: needs self-attention, query, key and value must be the same tensor");
  expect_input_error(run_decode_config(dir, torch(q, R"({"is_causal": true})")),
                     "decode: returns no attention weights, set options.need_weights to false");
}

// decode.depth: a synthetic context before the prompt, for timing; the
// report says the output is not a causal run's.
TEST(DecodeCli, SyntheticDepth) {
  TempDir dir;
  for (const char* backend : {"reference", "cpu"}) {
    auto r = run_decode_config(dir, llama(R"(, "decode": {"prompt": 3, "tokens": 10, "depth": 700, "cache_dtype": "bfloat16"})",
                                   backend),
                        "--json " + shell_quote(dir.file("r.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("after a synthetic context of 700 positions"), std::string::npos) << r.out;
    EXPECT_NE(read_text(dir.file("r.json")).find("\"depth\": 700"), std::string::npos);
  }
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 3, "tokens": 10, "depth": -1})")), "decode.depth");
  expect_input_error(run_decode_config(dir, llama(R"(, "decode": {"prompt": 3, "tokens": 10, "depth": 99999999})")),
                     "decode.depth: expected at most 16777216 positions, found 99999999");
}
