#pragma once
// An independent numpy/torch implementation of every metric of
// mha::compare, run through /usr/bin/python3, to check the C++ against.
#include <nlohmann/json.hpp>

#include "compare/compare.h"

namespace mha::test {

struct OracleCase {
  Tensor ref, out;
  compare::Options opt;
};

// Metrics of each case as numpy/torch compute them, in the layout of
// compare::to_json (only the fields the oracle computes). One python run
// for all cases, since starting torch takes seconds.
std::vector<nlohmann::json> numpy_metrics(const std::vector<OracleCase>& cases);

// Expects compare::compare on the case to agree with its numpy_metrics:
// exactly for maxima, indices and counts, to 1e-12 for mean and PCC.
void expect_matches_numpy(const OracleCase& c, const nlohmann::json& want);

}  // namespace mha::test
