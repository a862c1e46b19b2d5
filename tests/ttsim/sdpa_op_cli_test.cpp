// `mha op sdpa` at tt_metal 2024 (0255f50's kernel, tt_sdpa): bit for bit
// against the oracle called directly with the op's defaults (TT-NN's), the
// report, and its one-line refusals. The latest programs have their own
// (sdpa_standard_test.cpp, sdpa_streaming_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "io/tensor_file.h"
#include "support/test_support.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "ttsim/tile.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

Tensor oracle(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* m, DataFormat f, const SdpaConfig& c) {
  const TileTensor tq = to_tile_layout(q, f), tk = to_tile_layout(k, f), tv = to_tile_layout(v, f);
  TileTensor tm, out;
  if (m) tm = to_tile_layout(*m, DataFormat::Bfp4_b);
  SdpaConfig at2024 = c;
  at2024.compute.tt_metal = TtMetal::R2024;
  tt_sdpa_oracle(tq, tk, tv, m ? &tm : nullptr, out, at2024);
  return to_tensor(out);
}

}  // namespace

TEST(SdpaOpCli, BitForBitWithTheOracle) {
  TempDir dir;
  const Tensor q = randn({1, 2, 128, 64}, 1), k = randn({1, 1, 128, 64}, 2), v = randn({1, 1, 128, 64}, 3);
  for (const auto& [n, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}})
    io::write_npy(dir.file(std::string(n) + ".npy"), *t);
  const std::string in = shell_quote(dir.file("q.npy")) + " " + shell_quote(dir.file("k.npy")) + " " +
                         shell_quote(dir.file("v.npy")),
                    out = " -o " + shell_quote(dir.file("o.npy")) + " --option tt_metal=2024";
  // Defaults: causal, chunks of 32, HiFi2, approx, 16-bit Dst, bf16.
  CommandResult r = run_mha("op sdpa " + in + out + " --option threads=2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), oracle(q, k, v, nullptr, DataFormat::Bfloat16, SdpaConfig{})));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "HiFi2");
  EXPECT_EQ(j["compute_kernel_config"]["math_approx_mode"], true);
  EXPECT_EQ(j["compute_kernel_config"]["fp32_dest_acc_en"], false);
  EXPECT_EQ(j["program_config"]["q_chunk_size"], 32);
  EXPECT_EQ(j["is_causal"], true);
  EXPECT_EQ(j["scale_bf16"], 0.125);
  // A program config, compute config and block-float inputs.
  SdpaConfig c;
  c.q_chunk_size = 64;
  c.k_chunk_size = 128;
  c.exp_approx_mode = false;
  c.compute.math_fidelity = MathFidelity::HiFi4;
  c.compute.fp32_dest_acc_en = true;
  c.compute.math_approx_mode = false;
  r = run_mha("op sdpa " + in + out +
              " --dtype bfloat8_b --option q_chunk_size=64 --option k_chunk_size=128 --option exp_approx_mode=false "
              "--math-fidelity HiFi4 --fp32-dest-acc-en --math-approx-mode=false --output-dtype bfloat8_b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  c.compute.output = DataFormat::Bfp8_b;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), oracle(q, k, v, nullptr, DataFormat::Bfp8_b, c)));
  // Non-causal with a bfloat4_b mask.
  std::vector<float> mv(128 * 128);
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i * 7919 % 5 == 0) ? -1e9f : 0.0f;
  const Tensor m = Tensor::from_f32({1, 1, 128, 128}, mv);
  io::write_npy(dir.file("m.npy"), m);
  r = run_mha("op sdpa " + in + " " + shell_quote(dir.file("m.npy")) + out +
              " --in3-dtype bfloat4_b --option is_causal=false --option scale=0.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SdpaConfig nc;
  nc.is_causal = false;
  nc.scale = 0.2f;
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), oracle(q, k, v, &m, DataFormat::Bfloat16, nc)));
  // A sliding window and per-head sinks (held as bf16: 0.3 -> 0.30078125).
  r = run_mha("op sdpa " + in + out + " --option sliding_window_size=40 --option 'attention_sink=[0.3,2]' --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SdpaConfig ws;
  ws.sliding_window_size = 40;
  ws.attention_sink = {0.30078125f, 2.0f};
  EXPECT_TRUE(same_bits(io::read_tensor(dir.file("o.npy")), oracle(q, k, v, nullptr, DataFormat::Bfloat16, ws)));
  const nlohmann::json jw = nlohmann::json::parse(r.out);
  EXPECT_EQ(jw["sliding_window_size"], 40);
  EXPECT_EQ(jw["attention_sink_bf16"][0], 0.30078125);
}

TEST(SdpaOpCli, BadInputsExitTwoWithOneLine) {
  TempDir dir;
  io::write_npy(dir.file("q.npy"), randn({1, 4, 64, 64}, 1));
  io::write_npy(dir.file("k.npy"), randn({1, 2, 64, 64}, 2));
  io::write_npy(dir.file("k3.npy"), randn({1, 3, 64, 64}, 2));
  io::write_npy(dir.file("m.npy"), randn({1, 1, 64, 64}, 3));
  const std::string q = shell_quote(dir.file("q.npy")), k = shell_quote(dir.file("k.npy")),
                    k3 = shell_quote(dir.file("k3.npy")), m = shell_quote(dir.file("m.npy")),
                    out = " -o " + shell_quote(dir.file("o.npy")) + " --option tt_metal=2024";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sdpa " + q + " " + k + out, "sdpa: expected inputs Q K V [MASK], found 2 inputs"},
      {"sdpa " + q + " " + k3 + " " + k3 + out, "sdpa: expected nqh (4) a multiple of nkv (3)"},
      {"sdpa " + q + " " + k + " " + k + " " + m + out, "sdpa: a mask is given with is_causal=true"},
      {"sdpa " + q + " " + k + " " + k + out + " --option q_chunk_size=48", "q_chunk_size: expected a positive multiple of 32"},
      {"sdpa " + q + " " + k + " " + k + out + " --option k_chunk_size=128", "k_chunk_size 128 does not divide"},
      {"sdpa " + q + " " + k + " " + k + out + " --option is_causal=maybe", "op options.is_causal: expected true or false"},
      {"sdpa " + q + " " + k + " " + k + out + " --dtype float32", "sdpa: input 0 is float32"},
      {"exp " + q + out + " --option q_chunk_size=64", "q_chunk_size: unknown tt-sim option"},
      {"sdpa " + q + " " + k + " " + k + out + " --option sliding_window_size=-2", "sliding_window_size: expected 0"},
      {"sdpa " + q + " " + k + " " + k + out + " --option attention_sink=[1,2]",
       "attention_sink: expected one value per query head (4), found 2"},
      {"sdpa " + q + " " + k + " " + k + out + " --option attention_sink=1.5",
       "op options.attention_sink: expected an array of finite numbers"},
      {"sdpa " + q + " " + k + " " + k + " " + m + out + " --option is_causal=false --option sliding_window_size=8",
       "a mask is given with sliding_window_size"},
  };
  for (const auto& [args, needle] : cases) {
    CommandResult r = run_mha("op " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << args;
  }
}
