// mha compare REF OUT: flags only; the comparison lives in src/compare/.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/validators.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "io/output_set.h"
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

// --dtype names, with the short aliases TT and torch users type.
std::optional<DType> compare_dtype(const std::string& s) {
  if (s == "bfloat16" || s == "bf16") return DType::BF16;
  if (s == "float16" || s == "fp16" || s == "half") return DType::F16;
  if (s == "float32" || s == "fp32" || s == "float") return DType::F32;
  return std::nullopt;
}

}  // namespace

void add_compare(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand("compare", "Compare a tensor with a reference (exit 0 pass, 1 fail, 2 unusable input)");
  sub->add_option("REF", args->ref, "reference: FILE.npy, FILE.npz:NAME or FILE.safetensors:NAME")->required();
  sub->add_option("OUT", args->out, "tensor to check, same forms as REF")->required();
  sub->add_option("--dtype", args->dtype,
                  "cast both to this dtype before comparing: bfloat16 (bf16), float16 (fp16, half), float32 (fp32)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return compare_dtype(s) ? "" : "expected bfloat16 (bf16), float16 (fp16, half) or float32 (fp32), found '" + s + "'";
          },
          "DTYPE"));
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
    if (!args->dtype.empty()) opt.as_dtype = compare_dtype(args->dtype);
    opt.atol = given(sub, "--atol", args->atol);
    opt.rtol = given(sub, "--rtol", args->rtol);
    opt.pcc = given(sub, "--pcc", args->pcc);
    opt.max_abs = given(sub, "--max-abs", args->max_abs);
    opt.mean_abs = given(sub, "--mean-abs", args->mean_abs);
    opt.ulp = given(sub, "--ulp", args->ulp);
    opt.equal_nan = args->equal_nan;
    opt.check_dtype = true;
    opt.top_k = args->top;
    opt.ref_name = args->ref;
    opt.out_name = args->out;
    io::OutputSet outs;
    outs.add_input(io::tensor_spec_file(args->ref));
    outs.add_input(io::tensor_spec_file(args->out));
    const bool json_file = !args->json.empty() && args->json != "-";
    if (json_file) outs.add_file("--json", args->json);
    Tensor ref = io::read_tensor(args->ref);
    Tensor out = io::read_tensor(args->out);
    compare::Report report = compare::compare(ref, out, opt);
    const std::string json = args->json.empty() ? "" : compare::to_json(report).dump(2) + "\n";
    if (json_file) {
      outs.stage_bytes(args->json, json);
      outs.commit();
    }
    // `--json -`: stdout carries the JSON document and nothing else.
    std::cout << (args->json == "-" ? json : compare::format_text(report));
    std::cout.flush();
    exit_code = report.passed ? 0 : 1;
  });
}

}  // namespace mha::cli
