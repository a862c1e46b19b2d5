// KV-cache decode against scripts/torch_oracle.py's decode mode (a Hugging
// Face-style loop over a preallocated cache: prefill, then one token per
// call), on fresh shapes and seeds every run: llama_attention with GQA
// ratios 1, 4, 8 and MQA, head_dim 64 and 128 (and small), windows shorter
// and longer than the sequence or none, biases, P = 1 and T = 0 now and
// then; causal torch_mha batch-first and sequence-first. Both cache dtypes.
//   reference (float64) vs the float64 oracle: atol 1e-12 + rtol 1e-9
//     (bfloat16 too: both round through float32 to bfloat16);
//   cpu (float32) vs the float32 oracle: float32 cache atol 1e-5 + rtol
//     1.3e-6; bfloat16 cache max |diff| <= 2^-7 max |oracle| (the two round
//     float32 values that differ in their last bits, so a value can land on
//     the neighbouring bfloat16).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parity/parity.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

struct DecodeCase {
  std::string name;
  json config;
  std::string setup;  // python writing the case's files (cwd: the case folder)
  bool bf16 = false;
};

DecodeCase llama_decode_case(Rng& r, int i) {
  DecodeCase c;
  c.name = "llama_" + std::to_string(i);
  const std::vector<std::pair<int64_t, bool>> groups = {{1, false}, {4, false}, {8, false}, {1, true}};
  const auto& [ratio, mqa] = groups[i % 4];
  const int64_t kv = mqa ? 1 : r.uniform(1, 2), heads = mqa ? r.uniform(2, 8) : kv * ratio;
  const int64_t head_dim = r.pick(std::vector<int64_t>{8, 16, 64, 128});
  const int64_t b = r.uniform(1, 2), P = r.coin(0.2) ? 1 : r.uniform(2, 40), T = r.coin(0.15) ? 0 : r.uniform(1, 12);
  const int64_t L = P + T, hidden = r.uniform(8, 64);
  json p = {{"hidden_size", hidden}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
            {"head_dim", head_dim}, {"rope_theta", r.pick(std::vector<double>{10000.0, 500000.0})},
            {"attention_bias", r.coin()}, {"max_position_embeddings", 4096}};
  const int w = static_cast<int>(r.uniform(0, 2));
  if (w == 1 && L > 1) p["sliding_window"] = r.uniform(1, L - 1);
  if (w == 2) p["sliding_window"] = L + r.uniform(0, 8);
  c.bf16 = r.coin();
  c.config = {{"variant", "llama_attention"},
              {"params", p},
              {"weights", {{"init", "torch"}, {"seed", r.draw_seed()}}},
              {"inputs", {{"seed", r.draw_seed()}, {"x", {{"randn", {b, L, hidden}}}}}},
              {"decode", {{"prompt", P}, {"tokens", T}, {"cache_dtype", c.bf16 ? "bfloat16" : "float32"}}}};
  return c;
}

DecodeCase torch_mha_decode_case(Rng& r, int i) {
  DecodeCase c;
  c.name = "torch_mha_" + std::to_string(i);
  const int64_t heads = r.uniform(1, 4), dh = r.pick(std::vector<int64_t>{4, 8, 32}), e = heads * dh;
  const int64_t b = r.uniform(1, 3), P = r.uniform(1, 20), T = r.uniform(0, 10);
  const bool first = r.coin();
  c.setup = "np.save('x.npy', f32(" + py_shape(first ? std::vector<int64_t>{b, P + T, e} : std::vector<int64_t>{P + T, b, e}) +
            "))\n";
  c.bf16 = r.coin();
  c.config = {{"variant", "torch_mha"},
              {"params", {{"embed_dim", e}, {"num_heads", heads}, {"bias", r.coin()}, {"batch_first", first}}},
              {"weights", {{"init", "torch"}, {"seed", r.draw_seed()}}},
              {"inputs", {{"query", "x.npy"}, {"key", "x.npy"}, {"value", "x.npy"}}},
              {"options", {{"is_causal", true}, {"need_weights", false}}},
              {"decode", {{"prompt", P}, {"tokens", T}, {"cache_dtype", c.bf16 ? "bfloat16" : "float32"}}}};
  return c;
}

TEST(Parity, DecodeAgainstTorch) {
  Rng r;
  SCOPED_TRACE(r.trace());
  std::vector<DecodeCase> cases;
  for (int i = 0; i < 8; ++i) cases.push_back(llama_decode_case(r, i));
  for (int i = 0; i < 3; ++i) cases.push_back(torch_mha_decode_case(r, i));

  TempDir dir;
  std::string setup = "import os\nimport numpy as np\nrng = np.random.default_rng(" + std::to_string(r.seed()) +
                      ")\nf32 = lambda s, scale=1.0: (rng.standard_normal(s) * scale).astype(np.float32)\n";
  std::string oracle32, oracle64;
  for (const DecodeCase& c : cases) {
    const std::string d = dir.file(c.name);
    setup += "os.makedirs(" + shell_quote(d) + ", exist_ok=True)\nos.chdir(" + shell_quote(d) + ")\n" + c.setup;
  }
  auto s = run_python(setup);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  for (const DecodeCase& c : cases) {
    const std::string d = dir.file(c.name);
    write_text(d + "/c.json", c.config.dump());
    oracle32 += " --config " + shell_quote(d + "/c.json") + " --dtype float32 --out " + shell_quote(d + "/t32");
    oracle64 += " --config " + shell_quote(d + "/c.json") + " --dtype float64 --out " + shell_quote(d + "/t64");
  }
  // Both dtypes in one process: torch's import is most of its time.
  const std::string py = "/usr/bin/python3 " + shell_quote(source_dir() + "/scripts/torch_oracle.py");
  auto o = run_command(py + oracle32 + oracle64);
  ASSERT_EQ(o.exit_code, 0) << o.err;

  std::string check = "import numpy as np\nbad = []\n";
  for (const DecodeCase& c : cases) {
    const std::string d = dir.file(c.name);
    for (const char* be : {"reference", "cpu"}) {
      auto m = run_mha(std::string("run -n 1 --backend ") + be + " --config " + shell_quote(d + "/c.json") + " -o " +
                       shell_quote(d + "/" + be + ".npy"));
      ASSERT_EQ(m.exit_code, 0) << c.name << " " << be << ": " << m.err << "\n" << c.config.dump();
    }
    const std::string ref = shell_quote(d + "/reference.npy"), cpu = shell_quote(d + "/cpu.npy");
    const std::string t64 = shell_quote(d + "/t64/output.npy"), t32 = shell_quote(d + "/t32/output.npy");
    check += "a, t = np.load(" + ref + ").astype(np.float64), np.load(" + t64 + ").astype(np.float64)\n"
             "if a.shape != t.shape or not np.all(np.abs(a - t) <= 1e-12 + 1e-9 * np.abs(t)): bad.append('" + c.name +
             " reference %s' % np.abs(a - t).max())\n";
    check += "a, t = np.load(" + cpu + ").astype(np.float64), np.load(" + t32 + ").astype(np.float64)\n";
    if (c.bf16)
      check += "ok = a.shape == t.shape and np.abs(a - t).max() <= 2.0 ** -7 * np.abs(t).max()\n";
    else
      check += "ok = a.shape == t.shape and np.all(np.abs(a - t) <= 1e-5 + 1.3e-6 * np.abs(t))\n";
    check += "if not ok: bad.append('" + c.name + " cpu %s' % np.abs(a - t).max())\n";
  }
  check += "print('\\n'.join(bad) if bad else 'ok')\n";
  auto res = run_python(check);
  ASSERT_EQ(res.exit_code, 0) << res.err;
  std::string configs;
  for (const DecodeCase& c : cases) configs += c.name + ": " + c.config.dump() + "\n";
  EXPECT_EQ(res.out, "ok\n") << configs;
}

}  // namespace
}  // namespace mha::test
