#include "compare/report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "compare/numeric.h"

namespace mha::compare {

namespace {

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string nonfinite_str(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

// Values keep enough digits to tell neighbouring float32 values apart.
std::string format_value(double v) { return std::isfinite(v) ? printf_str("%.9g", v) : nonfinite_str(v); }

std::string format_count(double v) { return std::isfinite(v) ? printf_str("%.0f", v) : nonfinite_str(v); }

std::string index_str(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) s += (k ? ", " : "") + std::to_string(index[k]);
  return s + "]";
}

std::string where(const Position& p) {
  return "at " + index_str(p.index) + " (ref " + format_value(p.ref) + ", out " + format_value(p.out) + ")";
}

// Seed 000 computed its metrics in bfloat16 arithmetic; showing our double
// result rounded to the half-precision dtype lets the two be read side by side.
std::string in_low_precision(const Report& r, double v) {
  if (r.compared_dtype != DType::BF16 && r.compared_dtype != DType::F16) return "";
  return std::string(" (in ") + dtype_name(r.compared_dtype) + ": " + format_metric(round_to(r.compared_dtype, v)) + ")";
}

std::string side_line(const char* label, const Side& s) {
  return std::string(label) + "  " + s.name + "  " + shape_str(s.shape) + " " + dtype_name(s.dtype) +
         "  NaN " + std::to_string(s.nan) + "  +Inf " + std::to_string(s.pos_inf) + "  -Inf " +
         std::to_string(s.neg_inf) + "\n";
}

// The shortest text that reads back as exactly v (thresholds are numbers
// the user typed: 0.9999999 prints as typed, not as 1.000000).
std::string shortest(double v) {
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// A measured value and its threshold as text that differs whenever the two
// numbers do: the threshold as typed, the value to 9 significant digits or
// as many more as it takes (17 tell any two doubles apart). A PCC of
// 0.99999951 against 0.9999999 must not read "1.000000 < 1.000000".
std::pair<std::string, std::string> distinct_pair(double v, double t) {
  if (!std::isfinite(v) || !std::isfinite(t)) return {format_metric(v), format_metric(t)};
  std::string b = shortest(t), a;
  for (int digits = 9; digits <= 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    a = buf;
    if (v == t || a != b) break;
  }
  return {a, b};
}

// PCC near 1 is where thresholds live (0.9999, 0.99999): six decimals would
// print 0.99999951 as 1.000000, so a PCC that is not exactly +-1 gets the
// digits that show it.
std::string format_pcc(double v) {
  if (!std::isfinite(v) || std::fabs(v) == 1.0 || format_metric(std::fabs(v)) != "1.000000") return format_metric(v);
  return distinct_pair(v, std::copysign(1.0, v)).first;
}

std::string check_line(const Check& c) {
  std::string s = "  " + c.name + std::string(10 - c.name.size(), ' ') + (c.passed ? "PASS  " : "FAIL  ");
  if (c.name == "allclose") return s + format_count(c.value) + " mismatched\n";
  if (c.name == "dtype")
    return s + "torch." + dtype_name(c.ref_dtype) + " != torch." + dtype_name(c.out_dtype) +
           ": the values for attribute 'dtype' do not match (as in torch.testing.assert_close); --dtype NAME "
           "casts both to NAME\n";
  auto [v, t] = distinct_pair(c.value, c.threshold);
  if (c.name == "pcc") return s + v + (c.passed ? " >= " : " < ") + t + "\n";
  if (c.name == "ulp") v = format_count(c.value);
  return s + v + (c.passed ? " <= " : " > ") + t + "\n";
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nonfinite_str(v)); }

nlohmann::json position_json(const Position& p) {
  return {{"value", num(p.value)}, {"index", p.index}, {"ref", num(p.ref)}, {"out", num(p.out)}};
}

nlohmann::json side_json(const Side& s) {
  return {{"name", s.name}, {"shape", s.shape}, {"dtype", dtype_name(s.dtype)},
          {"nan", s.nan}, {"pos_inf", s.pos_inf}, {"neg_inf", s.neg_inf}};
}

template <class T, class F>
nlohmann::json optional_json(const std::optional<T>& v, F f) {
  return v ? f(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string format_metric(double v) {
  if (!std::isfinite(v)) return nonfinite_str(v);
  double a = std::fabs(v);
  if (a == 0 || (a >= 1e-3 && a < 1e6)) return printf_str("%.6f", v);
  return printf_str("%.6e", v);
}

std::string format_text(const Report& r) {
  std::string s = side_line("ref", r.ref) + side_line("out", r.out);
  s += std::string("compared as ") + dtype_name(r.compared_dtype) + (r.cast ? " (both cast)" : "") + ", " +
       std::to_string(r.numel) + " elements, " + std::to_string(r.finite_pairs) + " with both values finite\n";
  if (r.nonfinite_mismatches)
    s += "non-finite mismatches  " + std::to_string(r.nonfinite_mismatches) +
         " (NaN or Inf on one side only, or opposite infinities)\n";
  const std::string na = "n/a (no finite pairs)";
  s += "max abs diff   " + (r.max_abs_diff ? format_metric(r.max_abs_diff->value) + " " + where(*r.max_abs_diff) : na) + "\n";
  s += "mean abs diff  " + (r.mean_abs_diff ? format_metric(*r.mean_abs_diff) + in_low_precision(r, *r.mean_abs_diff) : na) + "\n";
  s += "max rel diff   " + (r.max_rel_diff ? format_metric(r.max_rel_diff->value) + " " + where(*r.max_rel_diff) : na) + "\n";
  s += "pcc            " + format_pcc(r.pcc) + in_low_precision(r, r.pcc) + "\n";
  s += "max ulp        " + (r.max_ulp ? format_count(r.max_ulp->value) + " " + where(*r.max_ulp) : "n/a (no elements)") + "\n";
  s += "allclose       |out - ref| <= " + printf_str("%g", r.tolerance.atol) + " + " + printf_str("%g", r.tolerance.rtol) +
       "*|ref|" + (r.equal_nan ? ", NaN == NaN" : "") + ": " + std::to_string(r.mismatches) + " of " +
       std::to_string(r.numel) + " mismatched (" + printf_str("%.3f", r.mismatch_percent) + "%)\n";
  if (!r.worst.empty()) {
    s += "worst " + std::to_string(r.worst.size()) + ":\n";
    for (const Position& p : r.worst)
      s += "  " + index_str(p.index) + "  ref " + format_value(p.ref) + "  out " + format_value(p.out) + "  diff " +
           format_metric(p.value) + "  allowed " + format_metric(p.allowed) + "\n";
  }
  s += "checks\n";
  int failed = 0;
  for (const Check& c : r.checks) {
    s += check_line(c);
    failed += !c.passed;
  }
  s += std::string(r.passed ? "PASS" : "FAIL") + ": " + std::to_string(failed) + " of " + std::to_string(r.checks.size()) +
       " checks failed, " + std::to_string(r.mismatches) + " of " + std::to_string(r.numel) + " elements mismatched\n";
  return s;
}

nlohmann::json to_json(const Report& r) {
  nlohmann::json worst = nlohmann::json::array();
  for (const Position& p : r.worst) {
    nlohmann::json w = position_json(p);
    w["abs_diff"] = w["value"];
    w.erase("value");
    w["allowed"] = num(p.allowed);
    worst.push_back(w);
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : r.checks) {
    if (c.name == "dtype")  // measured: OUT's dtype; expected: REF's
      checks.push_back({{"name", c.name}, {"passed", c.passed}, {"value", dtype_name(c.out_dtype)},
                        {"threshold", dtype_name(c.ref_dtype)}});
    else
      checks.push_back({{"name", c.name}, {"passed", c.passed}, {"value", num(c.value)}, {"threshold", num(c.threshold)}});
  }
  return {
      {"ref", side_json(r.ref)},
      {"out", side_json(r.out)},
      {"compared_dtype", dtype_name(r.compared_dtype)},
      {"cast", r.cast},
      {"numel", r.numel},
      {"finite_pairs", r.finite_pairs},
      {"nonfinite_mismatches", r.nonfinite_mismatches},
      {"max_abs_diff", optional_json(r.max_abs_diff, position_json)},
      {"mean_abs_diff", optional_json(r.mean_abs_diff, num)},
      {"max_rel_diff", optional_json(r.max_rel_diff, position_json)},
      {"pcc", num(r.pcc)},
      {"max_ulp", optional_json(r.max_ulp, position_json)},
      {"allclose",
       {{"atol", num(r.tolerance.atol)},
        {"rtol", num(r.tolerance.rtol)},
        {"equal_nan", r.equal_nan},
        {"mismatches", r.mismatches},
        {"mismatch_percent", num(r.mismatch_percent)},
        {"worst", worst}}},
      {"checks", checks},
      {"passed", r.passed},
  };
}

}  // namespace mha::compare
