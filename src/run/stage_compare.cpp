#include "run/stage_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "backends/backend.h"
#include "compare/report.h"
#include "model/mask.h"

namespace mha {

namespace {

// The stage the mask is applied in; the later ones (weights: 0 on both
// sides) compare as plain values.
constexpr const char* kMaskedStage = "masked_scores";

// Flags each masked position's `ref` and `out` values against their own
// row's largest unmasked value; returns the positions where either side
// did not mask. Rows are the last dim.
int64_t count_masked_disagreements(const std::vector<double>& ref, const std::vector<double>& out,
                                   const std::vector<uint8_t>& masked, int64_t row_len) {
  int64_t bad = 0;
  const double ninf = -std::numeric_limits<double>::infinity();
  for (size_t r0 = 0; r0 < masked.size(); r0 += static_cast<size_t>(row_len)) {
    double mref = ninf, mout = ninf;
    for (int64_t j = 0; j < row_len; ++j)
      if (!masked[r0 + j]) {
        mref = std::max(mref, ref[r0 + j]);
        mout = std::max(mout, out[r0 + j]);
      }
    for (int64_t j = 0; j < row_len; ++j)
      if (masked[r0 + j] && !(masked_in_row(ref[r0 + j], mref) && masked_in_row(out[r0 + j], mout))) ++bad;
  }
  return bad;
}

// The unmasked values of `t` as a 1-D tensor, in `t`'s dtype when it is
// float32 (so compare() sees the same dtype it would have), else float64.
Tensor unmasked_values(const Tensor& t, const std::vector<double>& v, const std::vector<uint8_t>& masked) {
  std::vector<double> keep;
  keep.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    if (!masked[i]) keep.push_back(v[i]);
  const Shape s{static_cast<int64_t>(keep.size())};
  if (t.dtype() != DType::F32) return Tensor::from_f64(s, keep);
  return Tensor::from_f32(s, std::vector<float>(keep.begin(), keep.end()));
}

}  // namespace

std::vector<uint8_t> masked_positions(const AttentionSpec& spec, const AttentionInputs& in, const Shape& sh) {
  const int64_t B = sh.at(0), H = sh.at(1), L = sh.at(2), S = sh.at(3);
  std::vector<uint8_t> m(static_cast<size_t>(B * H * L * S), 0);
  std::vector<double> mask;
  int64_t Bm = 1, Hm = 1, Lm = 1;
  if (in.mask && in.mask->ndim() == 4 && in.mask->dim(3) == S) {
    mask = in.mask->to_f64();
    Bm = in.mask->dim(0), Hm = in.mask->dim(1), Lm = in.mask->dim(2);
  }
  const MaskRule rule(spec);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < S; ++j) {
          bool x = !rule.visible(i, j);
          if (!mask.empty()) {
            const int64_t mi = (((Bm == 1 ? 0 : b) * Hm + (Hm == 1 ? 0 : h)) * Lm + (Lm == 1 ? 0 : i)) * S + j;
            x = x || mask[mi] == -std::numeric_limits<double>::infinity();
          }
          m[((b * H + h) * L + i) * S + j] = x;
        }
  return m;
}

bool masked_in_row(double value, double row_max_unmasked) {
  if (value == -std::numeric_limits<double>::infinity()) return true;
  // exp(-104) < 2^-150, half of float32's smallest denormal: rounds to 0.
  return std::isfinite(row_max_unmasked) && value - row_max_unmasked < -104.0;
}

std::vector<StageComparison> compare_stages(const AttentionSpec& spec, const AttentionInputs& inputs,
                                            const NamedTensors& stages) {
  std::unique_ptr<Backend> cpu = make_backend("cpu", nlohmann::ordered_json::object(), "--compare-stages");
  RunOptions ro;
  ro.collect_stages = true;
  const AttentionResult want = cpu->run(spec, inputs, ro);
  std::vector<StageComparison> out;
  for (const auto& [name, t] : stages) {
    StageComparison c;
    c.stage = name;
    c.shape = t.shape();
    const Tensor* ref = nullptr;
    for (const auto& [n, r] : want.stages)
      if (n == name) ref = &r;
    if (!ref || ref->shape() != t.shape()) {
      out.push_back(std::move(c));
      continue;
    }
    if (name == kMaskedStage && t.ndim() == 4) {
      const std::vector<uint8_t> masked = masked_positions(spec, inputs, t.shape());
      const std::vector<double> rv = ref->to_f64(), ov = t.to_f64();
      c.masked = std::count(masked.begin(), masked.end(), uint8_t{1});
      c.masked_disagree = count_masked_disagreements(rv, ov, masked, t.dim(3));
      c.report = compare::compare(unmasked_values(*ref, rv, masked), unmasked_values(t, ov, masked), compare::Options{});
    } else {
      c.report = compare::compare(*ref, t, compare::Options{});
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string format_stage_comparison(const std::vector<StageComparison>& cs) {
  std::string text = "stages vs cpu backend:\n";
  char line[320];
  const bool any_masked = std::any_of(cs.begin(), cs.end(), [](const StageComparison& c) { return c.masked > 0; });
  std::snprintf(line, sizeof line, "%-16s %-18s %12s %16s%s\n", "stage", "shape", "pcc", "max abs diff",
                any_masked ? "  masked positions" : "");
  text += line;
  for (const StageComparison& c : cs) {
    if (!c.report) {
      std::snprintf(line, sizeof line, "%-16s %-18s %12s %16s\n", c.stage.c_str(), shape_str(c.shape).c_str(), "-",
                    "(no cpu stage)");
      text += line;
      continue;
    }
    const compare::Report& r = *c.report;
    std::string masked;
    if (c.masked > 0)
      masked = "  " + std::to_string(c.masked) + " left out, " +
               (c.masked_disagree ? std::to_string(c.masked_disagree) + " NOT masked on both sides" : "all masked on both sides");
    std::snprintf(line, sizeof line, "%-16s %-18s %12s %16s%s\n", c.stage.c_str(), shape_str(c.shape).c_str(),
                  compare::format_metric(r.pcc).c_str(),
                  r.max_abs_diff ? compare::format_metric(r.max_abs_diff->value).c_str() : "-", masked.c_str());
    text += line;
  }
  return text;
}

nlohmann::json stage_comparison_json(const std::vector<StageComparison>& cs) {
  nlohmann::json j = nlohmann::json::array();
  for (const StageComparison& c : cs) {
    nlohmann::json e = {{"stage", c.stage}, {"shape", c.shape}, {"pcc", nullptr}, {"max_abs_diff", nullptr},
                        {"masked", c.masked}, {"masked_disagree", c.masked_disagree}};
    if (c.report) {
      e["pcc"] = c.report->pcc;
      if (c.report->max_abs_diff) e["max_abs_diff"] = c.report->max_abs_diff->value;
    }
    j.push_back(std::move(e));
  }
  return j;
}

}  // namespace mha
