// Every metric of mha::compare against the numpy/torch oracle, on random
// data and on edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "oracle.h"
#include "tensor/half.h"

namespace mha::test {
namespace {

using compare::Options;

std::vector<double> normal(std::size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// ref plus noise of relative size `noise`, with a few exact matches.
std::vector<double> perturbed(const std::vector<double>& ref, double noise, unsigned seed) {
  std::vector<double> e = normal(ref.size(), seed), out(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) out[i] = i % 7 == 0 ? ref[i] : ref[i] * (1 + noise * e[i]);
  return out;
}

Tensor as(DType t, const Shape& shape, const std::vector<double>& v) { return Tensor::from_f64(shape, v).cast(t); }

// Every case of every test, so that one python run computes all the oracle
// answers; tests look their cases up by the test's name.
std::map<std::string, std::vector<OracleCase>>& registry() {
  static std::map<std::string, std::vector<OracleCase>> cases;
  return cases;
}
struct Register {
  Register(const std::string& test, void (*build)(std::vector<OracleCase>&)) { build(registry()[test]); }
};
#define ORACLE_CASES(name)                                     \
  void build_##name(std::vector<OracleCase>& cases);           \
  const Register register_##name(#name, build_##name);         \
  TEST_F(CompareNumpy, name) { check(#name); }                 \
  void build_##name(std::vector<OracleCase>& cases)

class CompareNumpy : public ::testing::Test {
 protected:
  // Only the tests that will run (ctest runs one per process).
  static void SetUpTestSuite() {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    std::vector<std::string> tests;
    std::vector<OracleCase> all;
    for (int t = 0; t < suite->total_test_count(); ++t) {
      const ::testing::TestInfo* info = suite->GetTestInfo(t);
      if (!info->should_run()) continue;
      tests.push_back(info->name());
      const auto& cases = registry().at(info->name());
      all.insert(all.end(), cases.begin(), cases.end());
    }
    std::vector<nlohmann::json> answers = numpy_metrics(all);
    std::size_t k = 0;
    for (const std::string& test : tests)
      for (std::size_t i = 0; i < registry().at(test).size(); ++i) answers_[test].push_back(answers.at(k++));
  }
  static void check(const std::string& test) {
    const auto& cases = registry().at(test);
    ASSERT_EQ(answers_[test].size(), cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(test + " case " + std::to_string(i));
      expect_matches_numpy(cases[i], answers_[test][i]);
    }
  }
  static std::map<std::string, std::vector<nlohmann::json>> answers_;
};
std::map<std::string, std::vector<nlohmann::json>> CompareNumpy::answers_;

ORACLE_CASES(Float32RandomDefaultTolerance) {
  auto r = normal(60, 1);
  cases.push_back({as(DType::F32, {3, 4, 5}, r), as(DType::F32, {3, 4, 5}, perturbed(r, 3e-6, 2)), {}});
}

ORACLE_CASES(Float32RandomExplicitTolerances) {
  auto r = normal(200, 3);
  Options o;
  o.atol = 1e-3;
  o.rtol = 1e-2;
  o.top_k = 7;
  cases.push_back({as(DType::F32, {10, 20}, r), as(DType::F32, {10, 20}, perturbed(r, 2e-2, 4)), o});
}

ORACLE_CASES(Float64RefAgainstFloat32Out) {
  auto r = normal(77, 5);
  cases.push_back({as(DType::F64, {7, 11}, r), as(DType::F32, {7, 11}, r), {}});
}

ORACLE_CASES(CastToBfloat16) {
  auto r = normal(96, 6);
  Options o;
  o.as_dtype = DType::BF16;
  cases.push_back({as(DType::F32, {2, 3, 16}, r), as(DType::F32, {2, 3, 16}, perturbed(r, 1e-2, 7)), o});
}

ORACLE_CASES(CastToFloat16AndFloat32) {
  auto r = normal(50, 8, 100.0);
  Options o;
  o.as_dtype = DType::F16;
  cases.push_back({as(DType::F64, {50}, r), as(DType::F64, {50}, perturbed(r, 1e-3, 9)), o});
  o.as_dtype = DType::F32;
  cases.push_back({as(DType::F64, {50}, r), as(DType::F64, {50}, perturbed(r, 1e-6, 9)), o});
}

ORACLE_CASES(Float16Inputs) {
  auto r = normal(64, 10);
  cases.push_back({as(DType::F16, {8, 8}, r), as(DType::F16, {8, 8}, perturbed(r, 3e-3, 11)), {}});
}

ORACLE_CASES(LargeRandomMeanAndPcc) {
  auto r = normal(300000, 12);
  cases.push_back({as(DType::F32, {300, 1000}, r), as(DType::F32, {300, 1000}, perturbed(r, 1e-4, 13)), {}});
}

ORACLE_CASES(NanAndInfBothSides) {
  std::vector<double> r = {1, NAN, 3, INFINITY, -INFINITY, 6, NAN, 8, INFINITY, 0};
  std::vector<double> o = {1, NAN, NAN, INFINITY, INFINITY, 6.5, 7, INFINITY, 9, 0};
  Options o1;
  cases.push_back({as(DType::F32, {2, 5}, r), as(DType::F32, {2, 5}, o), o1});
  o1.equal_nan = true;
  o1.top_k = 10;
  cases.push_back({as(DType::F32, {2, 5}, r), as(DType::F32, {2, 5}, o), o1});
}

ORACLE_CASES(AllNanAndAllZero) {
  std::vector<double> nan(6, NAN), zero(6, 0.0), some = {0, 1, 2, 3, 4, 5};
  for (const auto* a : {&nan, &zero, &some})
    for (const auto* b : {&nan, &zero, &some}) cases.push_back({as(DType::F32, {6}, *a), as(DType::F32, {6}, *b), {}});
}

ORACLE_CASES(ConstantTensors) {
  std::vector<double> two(8, 2.0), three(8, 3.0), ramp = {0, 1, 2, 3, 4, 5, 6, 7};
  cases.push_back({as(DType::F32, {8}, two), as(DType::F32, {8}, three), {}});
  cases.push_back({as(DType::F32, {8}, two), as(DType::F32, {8}, ramp), {}});
  cases.push_back({as(DType::F32, {8}, ramp), as(DType::F32, {8}, two), {}});
}

ORACLE_CASES(ZeroSizeAndScalar) {
  cases.push_back({as(DType::F32, {0, 3}, {}), as(DType::F32, {0, 3}, {}), {}});
  cases.push_back({as(DType::F32, {}, {1.5}), as(DType::F32, {}, {1.25}), {}});
}

ORACLE_CASES(NearZeroReference) {
  std::vector<double> r = {1e-30, -1e-30, 0.0, 1e-8, 0.0, 1.0};
  std::vector<double> o = {2e-30, 1e-30, 1e-6, 1.1e-8, 0.0, 1.0};
  cases.push_back({as(DType::F32, {6}, r), as(DType::F32, {6}, o), {}});
  cases.push_back({as(DType::F64, {6}, r), as(DType::F64, {6}, o), {}});
}

ORACLE_CASES(SignedZeroAndUlpAcrossZero) {
  std::vector<double> r = {0.0, -0.0, 1e-45, -1e-45, 1.0, -1.0};
  std::vector<double> o = {-0.0, 0.0, -1e-45, 1e-45, std::nextafter(1.0f, 2.0f), 1.0};
  cases.push_back({as(DType::F32, {6}, r), as(DType::F32, {6}, o), {}});
  cases.push_back({as(DType::F64, {6}, r), as(DType::F64, {6}, o), {}});
}

ORACLE_CASES(IntAndBoolInputs) {
  std::vector<double> r = {0, 1, 2, -3, 4, 5, 100, -7}, o = {0, 1, 3, -3, 4, -5, 100, 7};
  cases.push_back({as(DType::I32, {2, 4}, r), as(DType::I32, {2, 4}, o), {}});
  cases.push_back({as(DType::I64, {8}, r), as(DType::I32, {8}, o), {}});
  std::vector<double> br = {0, 1, 1, 0, 1}, bo = {0, 1, 0, 0, 1};
  cases.push_back({as(DType::Bool, {5}, br), as(DType::Bool, {5}, bo), {}});
  Options o1;
  o1.as_dtype = DType::F32;
  cases.push_back({as(DType::I32, {2, 4}, r), as(DType::I32, {2, 4}, o), o1});
}

}  // namespace
}  // namespace mha::test
