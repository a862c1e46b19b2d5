// Issue 10: the docs a new user reads stand alone and cover what the tool
// takes: every config listed, every config key documented, no pointer to
// files outside the repository; and scripts/test.sh's `-LE slow` excludes
// tests that really carry that label.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

TEST(Docs, ReadmeListsEveryConfigAndLinksConfigMd) {
  const std::string readme = read_text(source_dir() + "/README.md");
  for (const auto& e : fs::directory_iterator(source_dir() + "/configs"))
    EXPECT_NE(readme.find(e.path().filename().string()), std::string::npos) << e.path().filename();
  EXPECT_NE(readme.find("(docs/CONFIG.md)"), std::string::npos);
  EXPECT_NE(readme.find("--compare-stages"), std::string::npos);
  EXPECT_NE(readme.find("threads=2"), std::string::npos);
}

// What README says of `mha run -n 0` is what CiSurface.ZeroIterationsRunsOnce
// checks the binary does: the first run only, no warm-up.
TEST(Docs, ReadmeSaysMinusNZeroRunsTheFirstRunOnly) {
  const std::string readme = read_text(source_dir() + "/README.md");
  EXPECT_NE(readme.find("`-n 0` makes the first run the only one, with no warm-up"), std::string::npos);
  EXPECT_NE(readme.find("cached runs: none (iterations 0)"), std::string::npos);
  EXPECT_EQ(readme.find("`-n` must be at least 1"), std::string::npos);
  const CommandResult r = run_mha("run --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0: the first run only"), std::string::npos) << r.out;
}

TEST(Docs, NoPointerToTheSpecOutsideTheRepository) {
  for (const char* f : {"/README.md", "/docs/CONFIG.md", "/docs/COMPARE.md", "/src/config/config.h"})
    EXPECT_EQ(read_text(source_dir() + f).find("SPEC"), std::string::npos) << f;
}

TEST(Docs, ConfigMdDocumentsEveryKey) {
  const std::string doc = read_text(source_dir() + "/docs/CONFIG.md");
  for (const char* key : {"`name`", "`variant`", "`params`", "`weights`", "`inputs`", "`options`", "`backend`", "`runs`",
                          "`reference`", "\"init\"", "\"file\"", "\"dir\"", "\"prefix\"", "index.json", "`seed`", "\"rand\"", "\"randn\"",
                          "`need_weights`", "`training`", "`average_attn_weights`", "`is_causal`", "`threads`",
                          "`device`", "`dtype`", "`math_fidelity`", "`fp32_dest_acc_en`", "`math_approx_mode`",
                          "`memory_config`", "`core_grid`", "`numerics`", "`warmup`", "`iterations`", "`atol`",
                          "`rtol`", "`pcc`", "`embed_dim`", "`kdim`", "`batch_first`", "`d_in`", "`d_model`",
                          "`hidden_size`", "`qkv_bias`", "`add_bias_kv`", "`add_zero_attn`", "`key_padding_mask`"})
    EXPECT_NE(doc.find(key), std::string::npos) << key;
}

TEST(Docs, SlowLabelThatTestShExcludesExists) {
  const std::string script = read_text(source_dir() + "/scripts/test.sh");
  ASSERT_NE(script.find("-LE slow"), std::string::npos);
  const std::string build = fs::path(MHA_BINARY).parent_path().string();
  // Tests are listed once their binary is built (gtest_discover_tests).
  if (!fs::exists(build + "/tests/test_parity")) GTEST_SKIP() << "test_parity not built in " << build;
  CommandResult r = run_command("cd " + shell_quote(build) + " && ctest -N -L slow");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Total Tests: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Parity"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha::test
