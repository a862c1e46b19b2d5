// mha compare REF OUT: flags only; the comparison lives in src/compare/.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace mha::cli {

namespace {

struct CompareArgs {
  std::string ref, out, dtype, json;
  double atol = 0, rtol = 0, pcc = 0, max_abs = 0, mean_abs = 0, ulp = 0;
  bool equal_nan = false;
  int top = 5;
};

// An option the user did not give stays unset, so compare() can tell a
// default tolerance from an explicit one.
std::optional<double> given(CLI::App* sub, const char* flag, double v) {
  return sub->count(flag) ? std::optional<double>(v) : std::nullopt;
}

// CLI11's own range checks print the range's bounds to 300 digits.
CLI::Validator number_in(double lo, double hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& s) -> std::string {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0' || !(v >= lo && v <= hi)) return "expected " + what + ", found '" + s + "'";
        return "";
      },
      what);
}

}  // namespace

void add_compare(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand("compare", "Compare a tensor with a reference (exit 0 pass, 1 fail, 2 unusable input)");
  sub->add_option("REF", args->ref, "reference: FILE.npy, FILE.npz:NAME or FILE.safetensors:NAME")->required();
  sub->add_option("OUT", args->out, "tensor to check, same forms as REF")->required();
  sub->add_option("--dtype", args->dtype, "cast both to this dtype before comparing")
      ->check(CLI::IsMember({"bfloat16", "float16", "float32"}));
  const CLI::Validator non_negative = number_in(0, HUGE_VAL, "a number >= 0");
  sub->add_option("--atol", args->atol, "absolute tolerance (default: torch.testing.assert_close's for the dtype)")
      ->check(non_negative);
  sub->add_option("--rtol", args->rtol, "relative tolerance (default: torch.testing.assert_close's for the dtype)")
      ->check(non_negative);
  sub->add_option("--pcc", args->pcc, "fail if PCC is below this")->check(number_in(-1, 1, "a number in [-1, 1]"));
  sub->add_option("--max-abs", args->max_abs, "fail if max |out - ref| exceeds this")->check(non_negative);
  sub->add_option("--mean-abs", args->mean_abs, "fail if mean |out - ref| exceeds this")->check(non_negative);
  sub->add_option("--ulp", args->ulp, "fail if the max ULP distance exceeds this")->check(non_negative);
  sub->add_flag("--equal-nan", args->equal_nan, "NaN in both at the same position counts as a match");
  sub->add_option("--top", args->top, "how many of the worst mismatches to list")->check(number_in(0, 1e6, "a count in [0, 1000000]"));
  sub->add_option("--json", args->json, "write every metric as JSON to FILE ('-' for stdout, replacing the text)");

  sub->callback([args, sub, &exit_code]() {
    exit_code = 2;  // until the comparison has been made
    compare::Options opt;
    if (!args->dtype.empty()) opt.as_dtype = dtype_from_name(args->dtype);
    opt.atol = given(sub, "--atol", args->atol);
    opt.rtol = given(sub, "--rtol", args->rtol);
    opt.pcc = given(sub, "--pcc", args->pcc);
    opt.max_abs = given(sub, "--max-abs", args->max_abs);
    opt.mean_abs = given(sub, "--mean-abs", args->mean_abs);
    opt.ulp = given(sub, "--ulp", args->ulp);
    opt.equal_nan = args->equal_nan;
    opt.top_k = args->top;
    opt.ref_name = args->ref;
    opt.out_name = args->out;
    Tensor ref = io::read_tensor(args->ref);
    Tensor out = io::read_tensor(args->out);
    compare::Report report = compare::compare(ref, out, opt);
    if (args->json == "-") {
      std::cout << compare::to_json(report).dump(2) << "\n";
    } else {
      if (!args->json.empty()) io::write_file_atomic(args->json, compare::to_json(report).dump(2) + "\n");
      std::cout << compare::format_text(report);
    }
    std::cout.flush();
    exit_code = report.passed ? 0 : 1;
  });
}

}  // namespace mha::cli
