// The rules of mha::compare checked by hand: tt-metal's PCC special cases,
// ULP counting, NaN/Inf handling, checks, options and report formatting.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "compare/compare.h"
#include "compare/numeric.h"
#include "compare/report.h"
#include "util/error.h"

namespace mha::compare {
namespace {

Tensor f32(const std::vector<float>& v) { return Tensor::from_f32({static_cast<int64_t>(v.size())}, v); }

double pcc_of(const std::vector<float>& r, const std::vector<float>& o) { return compare(f32(r), f32(o), {}).pcc; }

TEST(ComparePcc, TtMetalSpecialCases) {
  const float nan = NAN, inf = INFINITY;
  EXPECT_EQ(pcc_of({nan, nan}, {nan, nan}), 1.0);      // both all NaN
  EXPECT_EQ(pcc_of({nan, nan}, {1, 2}), 0.0);          // one all NaN
  EXPECT_EQ(pcc_of({1, 2}, {nan, nan}), 0.0);
  EXPECT_EQ(pcc_of({0, 0, 0}, {0, 1, 0}), 0.0);        // one all zero
  EXPECT_EQ(pcc_of({0, 0, 0}, {0, nan, 0}), 0.0);      // NaN counts as non-zero
  EXPECT_EQ(pcc_of({0, 0}, {0, 0}), 1.0);              // equal
  EXPECT_EQ(pcc_of({2, 2, 2}, {1, 2, 3}), 1.0);        // constant side: masked, 1
  EXPECT_EQ(pcc_of({1, 2, 3}, {5, 5, 5}), 1.0);
  EXPECT_EQ(pcc_of({1, inf, 3}, {1, nan, 3}), 1.0);    // NaN and Inf become 0: equal
  EXPECT_NEAR(pcc_of({1, 2, 3}, {-1, -2, -3}), -1.0, 1e-15);
  EXPECT_NEAR(pcc_of({1, 2, 3, 4}, {1, 2, 3, 5}), 0.9827076298239908, 1e-15);
  EXPECT_EQ(compare(f32({}), f32({}), {}).pcc, 1.0);  // zero-size: vacuously all NaN
}

// The rules tt-metal's comp_pcc added for degenerate tensors (issue 10: mha
// said 1.0 for both of the first two).
TEST(ComparePcc, TtMetalConstantAndSingleElementRules) {
  EXPECT_EQ(pcc_of({0.5f, 0.5f, 0.5f}, {0.7f, 0.7f, 0.7f}), 0.0);  // two different constants
  EXPECT_EQ(pcc_of({1.0f}, {1.5f}), 0.0);                          // one element, not equal
  EXPECT_EQ(pcc_of({1.0f}, {1.0f}), 1.0);
  EXPECT_EQ(pcc_of({2, 2}, {2.00001f, 2.00001f}), 1.0);  // constants within torch.isclose
  EXPECT_EQ(pcc_of({2, 2}, {2.001f, 2.001f}), 0.0);
  Options o;
  o.pcc = 0.99;
  EXPECT_FALSE(compare(f32({0.5f, 0.5f}), f32({0.7f, 0.7f}), o).passed);
}

TEST(CompareUlp, CountsRepresentableSteps) {
  EXPECT_EQ(ulp_distance(DType::F32, 1.0, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance(DType::F32, 0.0, -0.0), 0);
  double tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ulp_distance(DType::F32, tiny, -tiny), 2);
  EXPECT_EQ(ulp_distance(DType::F32, FLT_MAX, INFINITY), 1);
  EXPECT_EQ(ulp_distance(DType::BF16, 1.0, 1.0078125), 1);
  EXPECT_EQ(ulp_distance(DType::F16, 1.0, 1.0009765625), 1);
  EXPECT_EQ(ulp_distance(DType::F64, -DBL_MAX, DBL_MAX), 2.0 * static_cast<double>(0x7fefffffffffffffULL));
  EXPECT_EQ(ulp_distance(DType::I32, -3, 4), 7);
  EXPECT_EQ(ulp_distance(DType::F32, NAN, NAN), 0);
  EXPECT_EQ(ulp_distance(DType::F32, NAN, 1.0), INFINITY);
}

TEST(CompareRound, OutOfRangeAndHalfPrecision) {
  EXPECT_EQ(round_to(DType::F32, 1e300), INFINITY);
  EXPECT_EQ(round_to(DType::F32, -1e300), -INFINITY);
  EXPECT_EQ(round_to(DType::F32, static_cast<double>(FLT_MAX) * (1 + 1e-9)), FLT_MAX);
  EXPECT_EQ(round_to(DType::BF16, 0.3190), 0.318359375);
  EXPECT_EQ(round_to(DType::F16, 70000.0), INFINITY);
  EXPECT_EQ(round_to(DType::F64, 0.1), 0.1);
}

TEST(CompareDefaults, TorchAssertCloseTolerances) {
  EXPECT_EQ(default_tolerance(DType::F64).rtol, 1e-7);
  EXPECT_EQ(default_tolerance(DType::F64).atol, 1e-7);
  EXPECT_EQ(default_tolerance(DType::F32).rtol, 1.3e-6);
  EXPECT_EQ(default_tolerance(DType::F32).atol, 1e-5);
  EXPECT_EQ(default_tolerance(DType::F16).rtol, 1e-3);
  EXPECT_EQ(default_tolerance(DType::BF16).rtol, 1.6e-2);
  EXPECT_EQ(default_tolerance(DType::BF16).atol, 1e-5);
  EXPECT_EQ(default_tolerance(DType::I64).rtol, 0);
  EXPECT_EQ(default_tolerance(DType::Bool).atol, 0);
  Options o;
  o.as_dtype = DType::BF16;
  EXPECT_EQ(compare(f32({1}), f32({1}), o).tolerance.rtol, 1.6e-2);  // the compared dtype's
}

TEST(CompareNan, EqualNanOnlyWhenAsked) {
  Report r = compare(f32({NAN, 1}), f32({NAN, 1}), {});
  EXPECT_EQ(r.mismatches, 1);  // torch's equal_nan=False
  EXPECT_EQ(r.nonfinite_mismatches, 0);
  Options o;
  o.equal_nan = true;
  EXPECT_TRUE(compare(f32({NAN, 1}), f32({NAN, 1}), o).passed);
  EXPECT_EQ(compare(f32({1, 1}), f32({NAN, 1}), o).mismatches, 1);  // NaN in out only
  EXPECT_EQ(compare(f32({INFINITY}), f32({INFINITY}), {}).mismatches, 0);
  EXPECT_EQ(compare(f32({INFINITY}), f32({1e30f}), {}).mismatches, 1);  // Inf ref allows nothing else
}

TEST(CompareChecks, NonFiniteMismatchFailsDifferenceChecks) {
  Options o;
  o.atol = 1;
  o.max_abs = 1;
  o.mean_abs = 1;
  o.ulp = 1e9;
  Report r = compare(f32({1, 2, 3}), f32({1, 2, NAN}), o);
  ASSERT_TRUE(r.max_abs_diff);
  EXPECT_EQ(r.max_abs_diff->value, 0);  // over finite pairs
  EXPECT_EQ(r.nonfinite_mismatches, 1);
  ASSERT_EQ(r.checks.size(), 4u);
  for (const Check& c : r.checks) EXPECT_FALSE(c.passed) << c.name;
  EXPECT_FALSE(r.passed);
}

TEST(CompareChecks, ThresholdsAreInclusive) {
  Options o;
  o.atol = 0.5;
  o.rtol = 0;
  o.max_abs = 0.5;
  o.mean_abs = 0.25;
  o.pcc = 1.0;
  o.ulp = 4194304;  // 0.5 at 1.0 in float32 steps
  Report r = compare(f32({1, 2}), f32({1.5, 2}), o);
  EXPECT_EQ(r.max_ulp->value, 4194304);
  for (const Check& c : r.checks) EXPECT_EQ(c.passed, c.name != "pcc") << c.name;
}

TEST(CompareWorst, RankedByExcessThenIndex) {
  Options o;
  o.atol = 0.1;
  o.rtol = 0.5;
  o.top_k = 3;
  // Excess over atol + rtol*|ref|: 0.4, -, 0.4, 0.9, Inf (NaN)
  Report r = compare(f32({1, 1, 1, 10, 1}), f32({2, 1, 2, 16, NAN}), o);
  EXPECT_EQ(r.mismatches, 4);
  ASSERT_EQ(r.worst.size(), 3u);
  EXPECT_EQ(r.worst[0].flat, 4);
  EXPECT_EQ(r.worst[0].value, INFINITY);
  EXPECT_EQ(r.worst[1].flat, 3);
  EXPECT_EQ(r.worst[2].flat, 0);
  EXPECT_NEAR(r.worst[2].allowed, 0.6, 1e-12);
  o.top_k = 0;
  EXPECT_TRUE(compare(f32({1}), f32({2}), o).worst.empty());
}

TEST(CompareIndex, MultiDimensional) {
  Tensor a(DType::F32, {2, 3, 4}), b(DType::F32, {2, 3, 4});
  b.data<float>()[1 * 12 + 2 * 4 + 3] = 1;
  Report r = compare(a, b, {});
  EXPECT_EQ(r.max_abs_diff->index, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.max_rel_diff->value, INFINITY);  // ref 0
  EXPECT_EQ(r.worst.at(0).index, (std::vector<int64_t>{1, 2, 3}));
}

TEST(CompareInputs, ShapeMismatchAndBadOptions) {
  Options o;
  o.ref_name = "a.npy";
  o.out_name = "b.npy";
  try {
    compare(f32({1, 2}), f32({1, 2, 3}), o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "cannot compare: b.npy has shape (3,), expected (2,) as in a.npy");
  }
  o.atol = -1;
  EXPECT_THROW(compare(f32({1}), f32({1}), o), InputError);
  o.atol.reset();
  o.as_dtype = DType::I32;
  EXPECT_THROW(compare(f32({1}), f32({1}), o), InputError);
}

TEST(CompareEmpty, ZeroSizePasses) {
  Options o;
  o.max_abs = 0;
  o.mean_abs = 0;
  o.ulp = 0;
  o.pcc = 0.99;
  Report r = compare(Tensor(DType::F32, {0, 5}), Tensor(DType::F32, {0, 5}), o);
  EXPECT_TRUE(r.passed);
  EXPECT_FALSE(r.max_abs_diff);
  EXPECT_FALSE(r.mean_abs_diff);
  EXPECT_FALSE(r.max_ulp);
  EXPECT_EQ(r.mismatch_percent, 0);
  EXPECT_NE(format_text(r).find("n/a"), std::string::npos);
}

TEST(CompareReport, JsonEncodesNonFiniteAsStrings) {
  Report r = compare(f32({0, 1}), f32({1, INFINITY}), {});
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["max_rel_diff"]["value"], "inf");
  EXPECT_EQ(j["max_rel_diff"]["index"], nlohmann::json::array({0}));
  EXPECT_EQ(j["out"]["pos_inf"], 1);
  EXPECT_EQ(j["allclose"]["worst"][0]["out"], "inf");
  EXPECT_EQ(j["allclose"]["mismatches"], 2);
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["compared_dtype"], "float32");
  EXPECT_EQ(j["ref"]["shape"], nlohmann::json::array({2}));
}

TEST(CompareReport, MetricFormatting) {
  EXPECT_EQ(format_metric(0.0234375), "0.023438");
  EXPECT_EQ(format_metric(0), "0.000000");
  EXPECT_EQ(format_metric(1.5e-7), "1.500000e-07");
  EXPECT_EQ(format_metric(-INFINITY), "-inf");
  EXPECT_EQ(format_metric(NAN), "nan");
}

// Issue 10: a PCC of 0.99999951 against --pcc 0.9999999 printed
// "pcc FAIL 1.000000 < 1.000000".
TEST(CompareReport, FailLinesNeverShowEqualNumbers) {
  Report r;
  r.pcc = 0.99999951;
  r.checks = {{"pcc", false, 0.99999951, 0.9999999}, {"max-abs", false, 0.10000001, 0.1}};
  r.passed = false;
  std::string text = format_text(r);
  EXPECT_NE(text.find("pcc       FAIL  0.99999951 < 0.9999999\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pcc            0.99999951\n"), std::string::npos) << text;
  EXPECT_NE(text.find("max-abs   FAIL  0.10000001 > 0.1\n"), std::string::npos) << text;
  // Two doubles one step apart still print differently.
  r.checks = {{"pcc", false, std::nextafter(0.9999, 0.0), 0.9999}};
  text = format_text(r);
  EXPECT_NE(text.find("FAIL  0.9998999999999999 < 0.9999\n"), std::string::npos) << text;
  // A passing check prints its threshold as typed too.
  r.checks = {{"max-abs", true, 0.0234375, 0.025}};
  EXPECT_NE(format_text(r).find("max-abs   PASS  0.0234375 <= 0.025\n"), std::string::npos) << format_text(r);
}

}  // namespace
}  // namespace mha::compare
