// Bad configs and inputs: one line naming what and where, exit code 2, no
// output file left behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"

using namespace mha::test;

namespace {

// Writes `config` into a temp dir and runs `mha run` on it.
CommandResult run_config(const TempDir& dir, const std::string& config, const std::string& extra = "") {
  write_text(dir.file("c.json"), config);
  return run_mha("run -n 1 --config " + shell_quote(dir.file("c.json")) + " " + extra);
}

std::string book(const std::string& params, const std::string& extra = "") {
  return R"({"variant": "mha_causal", "params": )" + params +
         R"(, "weights": {"init": "torch", "seed": 123}, "inputs": {"x": ")" + data_file("your_journey_batch2.npy") + "\"}" +
         extra + "}";
}

const char* kGood = R"({"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 2})";


}  // namespace

TEST(RunErrors, GoodConfigRuns) {
  TempDir dir;
  auto r = run_config(dir, book(kGood), "--output " + shell_quote(dir.file("o.npy")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("o.npy")));
}

TEST(RunErrors, UnknownKeysNameTheirJsonPath) {
  TempDir dir;
  expect_input_error(run_config(dir, book(kGood, R"(, "bogus": 1)")), "config.bogus: unknown key");
  expect_input_error(run_config(dir, book(R"({"d_in": 3, "d_out": 2, "context_length": 6, "num_heads": 2, "heads": 2})")),
                     "params.heads: unknown parameter");
  expect_input_error(run_config(dir, book(kGood, R"(, "runs": {"iters": 3})")), "runs.iters: unknown key");
  expect_input_error(run_config(dir, book(kGood, R"(, "options": {"is_causal": true})")), "options.is_causal");
  expect_input_error(run_config(dir, book(kGood, R"(, "backend": {"name": "cpu", "fidelity": 1})")),
                     "backend.fidelity");
}

TEST(RunErrors, WrongTypesAndImpossibleValues) {
  TempDir dir;
  expect_input_error(run_config(dir, book(R"({"d_in": "3", "d_out": 2, "context_length": 6, "num_heads": 2})")),
                     "params.d_in: expected a positive integer, found the string \"3\"");
  expect_input_error(run_config(dir, book(R"({"d_in": 3, "d_out": 3, "context_length": 6, "num_heads": 2})")),
                     "params.d_out: expected a multiple of params.num_heads (2), found 3");
  expect_input_error(run_config(dir, book(R"({"d_in": 3, "d_out": 2, "context_length": 4, "num_heads": 2})")),
                     "longer than params.context_length 4");
  expect_input_error(run_config(dir, book(R"({"d_in": 4, "d_out": 2, "context_length": 6, "num_heads": 2})")),
                     "inputs.x: expected shape (batch, tokens, 4), found (2, 6, 3)");
  expect_input_error(run_config(dir, book(R"({"d_in": 3, "d_out": 2, "context_length": 6, "num_heads": 0})")),
                     "params.num_heads: expected a positive integer");
  expect_input_error(run_config(dir, R"({"variant": "mha_causal", "params": )" + std::string(kGood) +
                                          R"(, "inputs": {"y": ")" + data_file("your_journey_batch2.npy") + "\"}}"),
                     "inputs.y: unknown input (expected x)");
  expect_input_error(run_config(dir, R"({"variant": "torch_mha", "params": {"embed_dim": 3, "num_heads": 1},
    "inputs": {"query": ")" + data_file("your_journey_batch2.npy") + "\"}}"),
                     "inputs.key: required input is missing");
  expect_input_error(run_config(dir, "{\"variant\": \"nope\"}"), "unknown variant 'nope'");
  expect_input_error(run_config(dir, "{\"variant\": \"mha\", "), "invalid JSON");
}

TEST(RunErrors, MaskOfTheWrongShape) {
  TempDir dir;
  auto py = run_python("import numpy as np\nnp.save('" + dir.file("m.npy") + "', np.zeros((2, 1, 1, 5), np.float32))\n"
                       "np.save('" + dir.file("x.npy") + "', np.zeros((2, 6, 8), np.float32))\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  std::string cfg = R"({"variant": "ttnn_mha", "params": {"hidden_size": 8, "num_heads": 2},
    "weights": {"init": "rand", "seed": 0}, "inputs": {"x": "x.npy", "attention_mask": "m.npy"}})";
  expect_input_error(run_config(dir, cfg), "inputs.attention_mask: expected shape (2, 1, 1, 6), found (2, 1, 1, 5)");
}

TEST(RunErrors, WeightFilesNameMissingExtraAndMisshapenTensors) {
  TempDir dir;
  auto py = run_python(
      "import numpy as np\n"
      "w = {'W_query.weight': np.zeros((2, 3), np.float32), 'W_key.weight': np.zeros((2, 3), np.float32),\n"
      "     'W_value.weight': np.zeros((2, 3), np.float32), 'out_proj.weight': np.zeros((2, 2), np.float32),\n"
      "     'out_proj.bias': np.zeros(2, np.float32)}\n"
      "np.savez('" + dir.file("ok.npz") + "', **w)\n"
      "m = dict(w); del m['W_key.weight']; np.savez('" + dir.file("missing.npz") + "', **m)\n"
      "e = dict(w); e['extra'] = np.zeros(1, np.float32); np.savez('" + dir.file("extra.npz") + "', **e)\n"
      "s = dict(w); s['out_proj.bias'] = np.zeros(3, np.float32); np.savez('" + dir.file("shape.npz") + "', **s)\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto with = [&](const std::string& file) {
    return R"({"variant": "mha_causal", "params": )" + std::string(kGood) + R"(, "weights": {"file": ")" + file +
           R"("}, "inputs": {"x": ")" + data_file("your_journey_batch2.npy") + "\"}}";
  };
  EXPECT_EQ(run_config(dir, with("ok.npz")).exit_code, 0);
  expect_input_error(run_config(dir, with("missing.npz")), "missing tensor 'W_key.weight' or 'W_k.weight' of shape (2, 3)");
  expect_input_error(run_config(dir, with("extra.npz")), "unexpected tensor 'extra'");
  expect_input_error(run_config(dir, with("shape.npz")), "tensor 'out_proj.bias': expected shape (2,), found (3,)");
  expect_input_error(run_config(dir, with("nothere.npz")), "nothere.npz");
}

TEST(RunErrors, FailedRunLeavesNoOutputFile) {
  TempDir dir;
  auto r = run_config(dir, book(R"({"d_in": 3, "d_out": 3, "context_length": 6, "num_heads": 2})"),
                      "--output " + shell_quote(dir.file("o.npy")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.npy")));
}

TEST(RunReference, ExitsOneWhenTheReferenceDisagrees) {
  TempDir dir;
  // Seed 000's torch output matches; the TT hardware output does not at
  // float32 tolerances.
  ASSERT_EQ(run_config(dir, book(kGood), "--output " + shell_quote(dir.file("ref.npy"))).exit_code, 0);
  auto good = run_config(dir, book(kGood, R"(, "reference": {"file": ")" + dir.file("ref.npy") + "\"}"));
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  auto py = run_python("import numpy as np\nr = np.load('" + dir.file("ref.npy") + "')\nr[0, 0, 0] += 0.01\n"
                       "np.save('" + dir.file("bad.npy") + "', r)\n");
  ASSERT_EQ(py.exit_code, 0);
  auto bad = run_config(dir, book(kGood, R"(, "reference": {"file": ")" + dir.file("bad.npy") + "\"}"));
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("FAIL"), std::string::npos) << bad.out;
}

TEST(RunJson, WritesMachineReadableReport) {
  TempDir dir;
  auto r = run_config(dir, book(kGood), "--json " + shell_quote(dir.file("r.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string j = read_text(dir.file("r.json"));
  for (const char* key : {"\"timing\"", "\"first_ms\"", "\"median_ms\"", "\"cache\"", "\"output\""})
    EXPECT_NE(j.find(key), std::string::npos) << key;
}

TEST(Bench, SweepPrintsCsvRowsAndRejectsBadLists) {
  auto r = run_mha("bench --no-progress --variant torch_mha,mha --batch 1 --seq 16 --hidden 32 --heads 4 --causal 0,1 -r 2 -o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("variant,backend,test,batch,seq", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;  // header + 4 rows (mha causal skipped)
  auto bad = run_mha("bench --no-progress --seq 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--seq"), std::string::npos);
}

TEST(Bench, TtSimRowsTakeBackendOptions) {
  auto r = run_mha("bench --no-progress --backend tt-sim --variant ttnn_mha_fused --batch 1 --seq 32 --hidden 64 "
                   "--heads 2 -r 1 --backend-option threads=1 --backend-option dtype=bfloat8_b -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"backend\":\"tt-sim\""), std::string::npos) << r.out;
  auto bad = run_mha("bench --no-progress --backend tt-sim --backend-option bogus=1 --seq 8 --hidden 8 --heads 2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("backend.bogus"), std::string::npos) << bad.err;
}

// A spec the backend cannot run (Backend::supports) is one line naming the
// backend, the variant and what is missing, before any run: exit 2, and
// no output file.
TEST(RunErrors, UnsupportedOnTheBackendSaysWhy) {
  TempDir dir;
  const char* dropout = R"({"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.5, "num_heads": 2})";
  auto r = run_config(dir, book(dropout, R"(, "options": {"training": true}, "backend": {"name": "tt-sim"})"),
                      "--output " + shell_quote(dir.file("o.npy")));
  expect_input_error(r, "backend tt-sim cannot run variant mha_causal: dropout in training (p = 0.5");
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.npy")));
  // The same config runs on the cpu backend.
  auto ok = run_config(dir, book(dropout, R"(, "options": {"training": true}, "backend": {"name": "cpu"})"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Issue 10: key_padding_mask dtypes as torch 1.13 treats them.
TEST(RunErrors, KeyPaddingMaskDtypesAsTorch113) {
  TempDir dir;
  auto py = run_python("import numpy as np\nd = '" + dir.path() + "/'\n"
                       "np.save(d + 'q.npy', np.random.RandomState(0).rand(3, 2, 4).astype(np.float32))\n"
                       "np.save(d + 'kpm_u8.npy', np.array([[0, 1, 0], [0, 0, 0]], np.uint8))\n"
                       "np.save(d + 'kpm_f.npy', np.array([[0, -np.inf, 0], [0, 0, 0]], np.float32))\n"
                       "np.save(d + 'am_u8.npy', np.triu(np.ones((3, 3), np.uint8), 1))\n"
                       "np.save(d + 'am_f.npy', np.zeros((3, 3), np.float32))\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto cfg = [](const std::string& masks) {
    return R"({"variant": "torch_mha", "params": {"embed_dim": 4, "num_heads": 2},
      "weights": {"init": "torch", "seed": 0}, "inputs": {"query": "q.npy", "key": "q.npy", "value": "q.npy")" +
           masks + "}}";
  };
  expect_input_error(run_config(dir, cfg(R"(, "key_padding_mask": "kpm_u8.npy")")),
                     "inputs.key_padding_mask: expected bool or floating dtype (as torch 1.13), found uint8");
  auto ok = run_config(dir, cfg(R"(, "attn_mask": "am_u8.npy")"));  // deprecated in torch, still accepted
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  expect_input_error(run_config(dir, cfg(R"(, "attn_mask": "am_f.npy", "key_padding_mask": "kpm_f.npy")")),
                     "a float key_padding_mask with a float attn_mask is not applied by torch 1.13");
}

// llama_attention: params, position_ids and the padding mask are checked
// with one line each; tt-sim says why its SDPA path (the only one with a
// rotary embedding) does not take a 4-wide head.
TEST(RunErrors, LlamaAttentionInputs) {
  TempDir dir;
  auto py = run_python("import numpy as np\nd = '" + dir.path() + "/'\n"
                       "np.save(d + 'pos_f.npy', np.zeros((1, 6), np.float32))\n"
                       "np.save(d + 'pos_neg.npy', -np.ones((1, 6), np.int64))\n"
                       "np.save(d + 'pos_shape.npy', np.zeros((3, 6), np.int64))\n"
                       "np.save(d + 'pos.npy', np.arange(6, dtype=np.int32)[None] + 100)\n"
                       "np.save(d + 'mask2.npy', np.full((2, 6), 2, np.int64))\n"
                       "np.save(d + 'mask.npy', np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int64))\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto llama = [&](const std::string& params, const std::string& inputs) {
    return R"({"variant": "llama_attention", "params": )" + params + R"(, "inputs": {"x": {"randn": [2, 6, 16]})" +
           inputs + "}}";
  };
  const std::string good = R"({"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2})";
  auto in = [&](const char* name, const char* file) {
    return std::string(", \"") + name + "\": " + "\"" + dir.file(file) + "\"";
  };
  EXPECT_EQ(run_config(dir, llama(good, in("position_ids", "pos.npy") + in("attention_mask", "mask.npy"))).exit_code, 0);
  expect_input_error(run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 3})", "")),
                     "params.num_attention_heads: expected a multiple of params.num_key_value_heads (3), found 4");
  expect_input_error(run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "head_dim": 5})", "")),
                     "params.head_dim: expected an even width");
  expect_input_error(run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "sliding_window": 0})", "")),
                     "params.sliding_window: expected a positive integer");
  expect_input_error(run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "model_type": "mamba"})", "")),
                     "params.model_type: expected one of llama, mistral, qwen2, qwen3, gemma2, gemma3_text, gpt_oss, phi3, "
                     "deepseek_v3 (or mixtral, qwen2_moe, qwen3_moe, kimi_k2), found \"mamba\"");
  expect_input_error(
      run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "model_type": "qwen2", "attention_bias": true})",
                            "")),
      "params.attention_bias: not a Qwen2 setting");
  expect_input_error(run_config(dir, llama(R"({"hidden_size": 16, "num_attention_heads": 4, "qkv_bias": 1})", "")),
                     "params.qkv_bias: expected");
  expect_input_error(run_config(dir, llama(good, in("position_ids", "pos_f.npy"))),
                     "inputs.position_ids: expected an integer tensor, found float32");
  expect_input_error(run_config(dir, llama(good, in("position_ids", "pos_neg.npy"))),
                     "inputs.position_ids: expected non-negative positions, found -1");
  expect_input_error(run_config(dir, llama(good, in("position_ids", "pos_shape.npy"))),
                     "inputs.position_ids: expected shape (2 or 1, 6), found (3, 6)");
  expect_input_error(run_config(dir, llama(good, in("attention_mask", "mask2.npy"))),
                     "inputs.attention_mask: expected 1 (attend) or 0 (padding)");
  expect_input_error(run_config(dir, llama(good, ""), "--backend tt-sim"),
                     "rotary embeddings run only as SDPA, and the SDPA pipeline needs a head_dim that is a multiple of 32");
}
