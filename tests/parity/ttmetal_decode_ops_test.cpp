// tt-metal's own unit tests for the decode-time ops (sdpa_decode,
// rotary_embedding_llama, update_cache/fill_cache), a few cases of each,
// on tt-sim (the Python package's mha.op) against torch with tt-metal's PCC thresholds
// (scripts/ttmetal_decode_tests.py --quick; the larger runs are in
// docs/TTSIM.md).
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace mha::test {

using TtMetalDecodeOps = PythonPackageScriptTest;

// At tt_metal 2024 (the default, latest, runs below without the flag).
TEST_F(TtMetalDecodeOps, QuickSubsetPassesTtMetalsThresholds) {
  const CommandResult r = run_script_with_mha("ttmetal_decode_tests.py --quick --tt-metal 2024");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| sdpa_decode |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| rotary_embedding_llama |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| update_cache |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

// The same at tt_metal latest, the default (no flag), with the stored SDPA
// decode test also in its own form (is_causal=False with its -inf mask),
// which only latest runs.
TEST_F(TtMetalDecodeOps, QuickSubsetAtLatestPassesTtMetalsThresholds) {
  const CommandResult r = run_script_with_mha("ttmetal_decode_tests.py --quick --only sdpa_decode");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(non-causal)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

}  // namespace mha::test
