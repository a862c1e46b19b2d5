// tt-metal's SDPA prefill tests of tt_metal latest's period (the stored
// test_sdpa_prefill.py files scripts/ttmetal_sdpa_prefill_tests.py names), a
// few small cases, and test_sdpa_tt_large_seq's configuration at 256 tokens
// (scripts/ttmetal_sdpa_large_seq.py), on tt-sim at tt_metal latest against
// float64 with the bounds those tests assert. The larger runs are in
// docs/TTSIM-STUDY.md.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace mha::test {

using TtMetalSdpaPrefill = PythonPackageScriptTest;

TEST_F(TtMetalSdpaPrefill, QuickSubsetAtLatestMeetsTtMetalsBounds) {
  const CommandResult r = run_script_with_mha("ttmetal_sdpa_prefill_tests.py --quick --threads 1 --tt-metal latest");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* test : {"| test_sdpa_tt_small_chunks |", "| test_sdpa_noncausal_mask |", "| test_sdpa_tt_padded |",
                           "| test_sdpa_noncausal |", "| test_sdpa_tt |"})
    EXPECT_NE(r.out.find(test), std::string::npos) << test << "\n" << r.out;
  EXPECT_NE(r.out.find("RMSE < 0.033"), std::string::npos) << r.out;  // the padded test's bound
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("refused"), std::string::npos) << r.out;  // every quick case is modelled at latest
}

// At latest the verdict is the nightly test's RMSE < 0.0094 (its
// run_test_sdpa_tt asserts RMSE instead of PCC when given a threshold).
TEST_F(TtMetalSdpaPrefill, LargeSeqConfigurationAt256TokensJudgedByRmseAtLatest) {
  const CommandResult r =
      run_script_with_mha("ttmetal_sdpa_large_seq.py --seq 256 --heads 1 --threads 1 --tt-metal latest");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tt_metal latest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RMSE < 0.0094: pass"), std::string::npos) << r.out;
}

}  // namespace mha::test
