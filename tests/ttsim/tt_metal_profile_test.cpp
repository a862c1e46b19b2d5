// The `tt_metal` option: named kernel revisions. Every report names the
// profile and its commit, the profile keys the programs, softmax's
// reciprocal follows it (the 1/ln2-seeded one at 2024, the quadratic one at
// latest), an op not modelled at a profile refuses it in one line, and ops
// leave notes where the kernel ignores a flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "backends/ttsim/ttsim_options.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/revision.h"
#include "ttsim/tile.h"
#include "util/error.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;
using json = nlohmann::json;

namespace {

bool file_exists(const std::string& p) { return std::ifstream(p).good(); }


int64_t differing(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += std::memcmp(&a.data<float>()[i], &b.data<float>()[i], 4) != 0;
  return n;
}

// softmax as the kernel computes it at profile `t` (TT-NN's defaults).
Tensor core_softmax(const Tensor& a, TtMetal t) {
  ComputeConfig c = softmax_default_config();
  c.tt_metal = t;
  TileTensor out;
  tt_softmax(to_tile_layout(a, DataFormat::Bfloat16), out, c, kOracle);
  return to_tensor(out);
}

struct Op {
  TempDir dir;
  CommandResult run(const std::string& args) {
    return run_mha("op " + args + " -o " + shell_quote(dir.file("out.npy")));
  }
  Tensor out() { return io::read_tensor(dir.file("out.npy")); }
};

}  // namespace

// latest, today's kernels, is the default of the backend option, of every
// op's compute config and of `mha op --help`'s line.
TEST(TtMetalProfile, OptionParsesAndDefaultsToLatest) {
  EXPECT_EQ(parse_tt_options(json::object(), "backend").tt_metal, TtMetal::Latest);
  EXPECT_EQ(ComputeConfig{}.tt_metal, TtMetal::Latest);
  EXPECT_TRUE(contains(tt_options_help(), "tt_metal: whose kernels: \"latest\" (today's) or \"2024\"")) << tt_options_help();
  EXPECT_TRUE(contains(tt_options_help(), "softmax's 1/ln2-seeded reciprocal) (default latest)")) << tt_options_help();
  EXPECT_EQ(parse_tt_options({{"tt_metal", "latest"}}, "backend").tt_metal, TtMetal::Latest);
  // `--option tt_metal=2024` parses its value as JSON: the number 2024.
  EXPECT_EQ(parse_tt_options({{"tt_metal", 2024}}, "backend").tt_metal, TtMetal::R2024);
  try {
    parse_tt_options({{"tt_metal", "2025"}}, "backend");
    FAIL() << "parsed";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "backend.tt_metal")) << e.what();
    EXPECT_TRUE(contains(e.what(), "\"2024\" or \"latest\"")) << e.what();
  }
  EXPECT_STREQ(tt_metal_commit(TtMetal::R2024), "0255f50ff85d45d225ef4a20a7d09fc34320824b");
  EXPECT_STREQ(tt_metal_commit(TtMetal::Latest), "15a15bf5aa65e876561158b66c7d55b8b915e341");
}

// Unsaturated scores: the two reciprocals differ on some probabilities, and
// `mha op softmax` takes the profile's, reporting it in the line and --json.
TEST(TtMetalProfile, SoftmaxReciprocalFollowsTheProfile) {
  Op r;
  const Tensor a = randn({2, 64, 96}, 7);
  io::write_npy(r.dir.file("a.npy"), a);
  const std::string ia = shell_quote(r.dir.file("a.npy"));
  const Tensor legacy = core_softmax(a, TtMetal::R2024), quadratic = core_softmax(a, TtMetal::Latest);
  EXPECT_GT(differing(legacy, quadratic), 0);

  CommandResult res = r.run("softmax " + ia);  // the default: latest
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_EQ(differing(r.out(), quadratic), 0);
  EXPECT_TRUE(contains(res.out, "tt_metal latest")) << res.out;
  res = r.run("softmax " + ia + " --json -");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  json j = json::parse(res.out);
  EXPECT_EQ(j["tt_metal"]["profile"], "latest");
  EXPECT_EQ(j["tt_metal"]["commit"], "15a15bf5aa65e876561158b66c7d55b8b915e341");
  EXPECT_EQ(j["attributes"]["tt_metal"], "latest");
  ASSERT_EQ(j["programs"].size(), 1u);
  EXPECT_TRUE(contains(j["programs"][0].get<std::string>(), "tt_metal=latest")) << j["programs"];

  res = r.run("softmax " + ia + " --option tt_metal=2024 --json -");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_EQ(differing(r.out(), legacy), 0);
  j = json::parse(res.out);
  EXPECT_EQ(j["tt_metal"]["profile"], "2024");
  EXPECT_EQ(j["tt_metal"]["commit"], "0255f50ff85d45d225ef4a20a7d09fc34320824b");
  EXPECT_EQ(j["attributes"]["tt_metal"], "2024");
  ASSERT_EQ(j["programs"].size(), 1u);
  EXPECT_TRUE(contains(j["programs"][0].get<std::string>(), "tt_metal=2024")) << j["programs"];
}

// An op whose kernel did not change runs one implementation at both
// profiles: the same bits, a different program key.
TEST(TtMetalProfile, SharedOpsGiveTheSameBits) {
  Op r;
  io::write_npy(r.dir.file("a.npy"), randn({40, 64}, 3));
  io::write_npy(r.dir.file("b.npy"), randn({64, 48}, 4));
  const std::string a = shell_quote(r.dir.file("a.npy")), b = shell_quote(r.dir.file("b.npy"));
  for (const std::string& call : {"matmul " + a + " " + b, "add " + a + " " + a, "multiply " + a + " " + a,
                                  "reciprocal " + a}) {
    ASSERT_EQ(r.run(call).exit_code, 0) << call;
    const Tensor at_latest = r.out();
    ASSERT_EQ(r.run(call + " --option tt_metal=2024").exit_code, 0) << call;
    EXPECT_EQ(differing(r.out(), at_latest), 0) << call;
  }
}

// At latest SDPA prefill runs the factory's program for the Dst mode
// (streaming with a 16-bit Dst, sdpa_standard with fp32); what a kernel
// does not model there is one line naming it and the way out, exit 2, no
// output.
TEST(TtMetalProfile, UnmodelledOpsRefuseInOneLine) {
  Op r;
  const Tensor q = randn({1, 2, 64, 64}, 5);
  for (const char* n : {"q.npy", "k.npy", "v.npy"}) io::write_npy(r.dir.file(n), q);
  const std::string qkv = shell_quote(r.dir.file("q.npy")) + " " + shell_quote(r.dir.file("k.npy")) + " " +
                          shell_quote(r.dir.file("v.npy"));
  // The fp32-Dst kernel takes a causal window at latest, not a non-causal one.
  CommandResult res = r.run("sdpa " + qkv + " --option tt_metal=latest --fp32-dest-acc-en --option is_causal=false" +
                            " --option sliding_window_size=32");
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_TRUE(contains(res.err, "sdpa: sliding_window_size with is_causal=false is not modelled at tt_metal latest "
                                "with fp32_dest_acc_en"))
      << res.err;
  EXPECT_TRUE(contains(res.err, "; run it with tt_metal=2024")) << res.err;
  EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
  EXPECT_FALSE(file_exists(r.dir.file("out.npy")));
  EXPECT_EQ(r.run("sdpa " + qkv + " --option tt_metal=latest --option sliding_window_size=32").exit_code, 0);
  // latest is the default: a window and a sink run there on the streaming kernel.
  EXPECT_EQ(r.run("sdpa " + qkv + " --option sliding_window_size=32").exit_code, 0);
  EXPECT_EQ(r.run("sdpa " + qkv + " --option 'attention_sink=[1,2]'").exit_code, 0);
  EXPECT_EQ(r.run("sdpa " + qkv + " --option tt_metal=latest").exit_code, 0);
  EXPECT_EQ(r.run("sdpa " + qkv + " --option tt_metal=latest --fp32-dest-acc-en").exit_code, 0);
  EXPECT_EQ(r.run("sdpa " + qkv + " --option tt_metal=latest --fp32-dest-acc-en --option sliding_window_size=32")
                .exit_code,
            0);
  EXPECT_EQ(r.run("sdpa " + qkv).exit_code, 0);
  EXPECT_EQ(r.run("sdpa " + qkv + " --option tt_metal=2024").exit_code, 0);  // the way out the line names
}

// Item 6's mechanism: an op's note reaches `mha op`'s text and --json.
TEST(TtMetalProfile, IgnoredFlagIsNoted) {
  Op r;
  const Tensor q = randn({1, 2, 64, 64}, 6);
  for (const char* n : {"q.npy", "k.npy", "v.npy"}) io::write_npy(r.dir.file(n), q);
  const std::string qkv = shell_quote(r.dir.file("q.npy")) + " " + shell_quote(r.dir.file("k.npy")) + " " +
                          shell_quote(r.dir.file("v.npy"));
  const std::string note = "exp_approx_mode=false does not reach the score exp at tt_metal 2024 (the kernel's exp_tile<true>)";
  // At 2024, where the default exp_approx_mode=true leaves no note (every
  // latest SDPA run notes the inverted rescale exp).
  const std::string at2024 = "sdpa " + qkv + " --option tt_metal=2024";
  CommandResult res = r.run(at2024 + " --option exp_approx_mode=false");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_TRUE(contains(res.out, "note: " + note + "\n")) << res.out;
  res = r.run(at2024 + " --option exp_approx_mode=false --json -");
  const json j = json::parse(res.out);
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_EQ(j["notes"][0], note);
  res = r.run(at2024 + " --json -");
  EXPECT_FALSE(json::parse(res.out).contains("notes"));
  res = r.run("sdpa " + qkv + " --json -");  // the default, latest
  EXPECT_TRUE(contains(json::parse(res.out)["notes"].dump(), "tt-metal PR #56925")) << res.out;
}

// `mha run` names the profile in its text and --json reports; the seed 000
// config binds 2024, the profile that reproduces its hardware output (at
// latest softmax's quadratic reciprocal misses it).
TEST(TtMetalProfile, MhaRunReportsTheProfileAndSeedsBindTo2024) {
  TempDir dir;
  const std::string cfg = shell_quote(repo("configs/seed000_tt_mha.json"));
  CommandResult res = run_mha("run --config " + cfg + " --json " + shell_quote(dir.file("r.json")));
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_TRUE(contains(res.out, "tt_metal: 2024 (tenstorrent/tt-metal 0255f50ff85d45d225ef4a20a7d09fc34320824b)\n"))
      << res.out;
  const json j = json::parse(read_text(dir.file("r.json")));
  EXPECT_EQ(j["backend_info"]["tt_metal"]["profile"], "2024");

  json latest = json::parse(read_text(repo("configs/seed000_tt_mha.json")));
  latest["backend"]["tt_metal"] = "latest";
  latest["inputs"]["x"] = repo("data/your_journey_batch2.npy");
  latest["reference"]["file"] = repo("data/seed000_ttnn_out.npy");
  write_text(dir.file("latest.json"), latest.dump());
  res = run_mha("run --config " + shell_quote(dir.file("latest.json")));
  EXPECT_NE(res.exit_code, 0) << res.out;  // the atol = rtol = 0 reference check fails
  EXPECT_TRUE(contains(res.out, "tt_metal: latest")) << res.out;
}

// `mha run` end to end at latest: tt_transformers' SDPA prefill (fp32 Dst,
// exp_approx_mode off) runs compute_common.hpp's sdpa_standard, and the run
// says which flags that kernel ignores or inverts.
TEST(TtMetalProfile, MhaRunLlamaAttentionAtLatest) {
  TempDir dir;
  json c = json::parse(read_text(repo("configs/llama_attention_ttsim.json")));
  c["backend"]["tt_metal"] = "latest";
  write_text(dir.file("c.json"), c.dump());
  const CommandResult res = run_mha("run --config " + shell_quote(dir.file("c.json")) + " --json " +
                                    shell_quote(dir.file("r.json")));
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_TRUE(contains(res.out, "tt_metal: latest (tenstorrent/tt-metal 15a15bf5")) << res.out;
  EXPECT_TRUE(contains(res.out, "note: exp_approx_mode=false does not reach the score exp at tt_metal latest "
                                "(tt-metal #56710)\n"))
      << res.out;
  const json j = json::parse(read_text(dir.file("r.json")));
  EXPECT_EQ(j["backend_info"]["notes"].size(), 2u);
  bool keyed = false;
  for (const auto& [op, v] : j["backend_info"]["program_cache"].items()) keyed = keyed || contains(op, "scaled_dot");
  EXPECT_TRUE(keyed) << j["backend_info"]["program_cache"];
}
