#include "compare/compare.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "compare/numeric.h"
#include "util/error.h"

namespace mha::compare {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::F64: return {1e-7, 1e-7};
    case DType::F32: return {1.3e-6, 1e-5};
    case DType::F16: return {1e-3, 1e-5};
    case DType::BF16: return {1.6e-2, 1e-5};
    default: return {0, 0};  // integers and bool must match exactly
  }
}

namespace {

// Values as compared: read as double, rounded to the compared dtype when
// the user asked for a cast.
struct Reader {
  const Tensor& t;
  DType as;
  bool cast;
  double operator()(int64_t i) const {
    double v = t.get_f64(i);
    return cast ? round_to(as, v) : v;
  }
};

void validate(const Options& o) {
  if (o.as_dtype && !dtype_is_float(*o.as_dtype))
    throw InputError(std::string("--dtype: expected bfloat16, float16 or float32, found ") + dtype_name(*o.as_dtype));
  auto non_negative = [](const std::optional<double>& v, const char* flag) {
    if (v && !(*v >= 0 && !std::isnan(*v)))
      throw InputError(std::string(flag) + ": expected a number >= 0, found " + std::to_string(*v));
  };
  non_negative(o.atol, "--atol");
  non_negative(o.rtol, "--rtol");
  non_negative(o.max_abs, "--max-abs");
  non_negative(o.mean_abs, "--mean-abs");
  non_negative(o.ulp, "--ulp");
  if (o.pcc && !(*o.pcc >= -1 && *o.pcc <= 1))
    throw InputError("--pcc: expected a number in [-1, 1], found " + std::to_string(*o.pcc));
  if (o.top_k < 0) throw InputError("--top: expected a count >= 0, found " + std::to_string(o.top_k));
}

Side describe(const Tensor& t, const std::string& name) {
  Side s;
  s.name = name;
  s.shape = t.shape();
  s.dtype = t.dtype();
  return s;
}

void count_nonfinite(Side& s, double v) {
  if (std::isnan(v)) ++s.nan;
  else if (v == INFINITY) ++s.pos_inf;
  else if (v == -INFINITY) ++s.neg_inf;
}

// A mismatch ranked by how far it exceeds its allowance.
struct Ranked {
  double excess;
  Position pos;
};
// Orders the worse mismatch first; ties go to the lower flat index, so the
// report is deterministic and reads like numpy's first-occurrence argmax.
bool worse(const Ranked& a, const Ranked& b) {
  if (a.excess != b.excess) return a.excess > b.excess;
  return a.pos.flat < b.pos.flat;
}
struct WorseFirst {
  bool operator()(const Ranked& a, const Ranked& b) const { return worse(a, b); }
};

Position at(int64_t flat, double r, double o, double value) {
  Position p;
  p.flat = flat;
  p.ref = r;
  p.out = o;
  p.value = value;
  return p;
}

// Keeps the first position with the largest value (numpy argmax ties).
void keep_max(std::optional<Position>& best, int64_t i, double r, double o, double value) {
  if (!best || value > best->value) best = at(i, r, o, value);
}

void add_checks(Report& rep, const Options& opt) {
  if (opt.check_dtype && !opt.as_dtype && rep.ref.dtype != rep.out.dtype) {
    Check c{"dtype", false, 0, 0};
    c.out_dtype = rep.out.dtype;
    c.ref_dtype = rep.ref.dtype;
    rep.checks.push_back(c);
  }
  rep.checks.push_back({"allclose", rep.mismatches == 0, static_cast<double>(rep.mismatches), 0});
  if (opt.pcc) rep.checks.push_back({"pcc", rep.pcc >= *opt.pcc, rep.pcc, *opt.pcc});
  // A NaN or Inf where the other side differs is an unbounded difference.
  double unbounded = rep.nonfinite_mismatches ? INFINITY : 0.0;
  if (opt.max_abs) {
    double v = std::max(unbounded, rep.max_abs_diff ? rep.max_abs_diff->value : 0.0);
    rep.checks.push_back({"max-abs", v <= *opt.max_abs, v, *opt.max_abs});
  }
  if (opt.mean_abs) {
    double v = std::max(unbounded, rep.mean_abs_diff.value_or(0.0));
    rep.checks.push_back({"mean-abs", v <= *opt.mean_abs, v, *opt.mean_abs});
  }
  if (opt.ulp) {
    double v = rep.max_ulp ? rep.max_ulp->value : 0.0;
    rep.checks.push_back({"ulp", v <= *opt.ulp, v, *opt.ulp});
  }
  for (const Check& c : rep.checks) rep.passed = rep.passed && c.passed;
}

}  // namespace

Report compare(const Tensor& ref, const Tensor& out, const Options& opt) {
  validate(opt);
  if (ref.shape() != out.shape())
    throw InputError("cannot compare: " + opt.out_name + " has shape " + shape_str(out.shape()) + ", expected " +
                     shape_str(ref.shape()) + " as in " + opt.ref_name);
  Report rep;
  rep.ref = describe(ref, opt.ref_name);
  rep.out = describe(out, opt.out_name);
  rep.cast = opt.as_dtype.has_value();
  rep.compared_dtype = opt.as_dtype.value_or(ref.dtype());
  rep.numel = ref.numel();
  Tolerance def = default_tolerance(rep.compared_dtype);
  rep.tolerance = {opt.rtol.value_or(def.rtol), opt.atol.value_or(def.atol)};
  rep.equal_nan = opt.equal_nan;

  Reader rd{ref, rep.compared_dtype, rep.cast}, od{out, rep.compared_dtype, rep.cast};
  std::priority_queue<Ranked, std::vector<Ranked>, WorseFirst> worst;  // top: least bad kept
  Sum abs_sum;
  for (int64_t i = 0; i < rep.numel; ++i) {
    double r = rd(i), o = od(i);
    count_nonfinite(rep.ref, r);
    count_nonfinite(rep.out, o);
    double diff = std::fabs(o - r);
    bool both_nan = std::isnan(r) && std::isnan(o);
    bool finite = std::isfinite(r) && std::isfinite(o);
    if (finite) {
      ++rep.finite_pairs;
      abs_sum.add(diff);
      keep_max(rep.max_abs_diff, i, r, o, diff);
      double rel = diff == 0 ? 0.0 : diff / std::fabs(r);  // Inf where ref is 0
      keep_max(rep.max_rel_diff, i, r, o, rel);
    } else if (!both_nan && r != o) {
      ++rep.nonfinite_mismatches;
    }
    keep_max(rep.max_ulp, i, r, o, ulp_distance(rep.compared_dtype, r, o));

    double allowed = rep.tolerance.atol + rep.tolerance.rtol * std::fabs(r);
    // Infinities match only an equal infinity (an infinite ref would allow
    // any difference), as in torch.isclose; NaN matches only with equal_nan.
    bool close = both_nan ? opt.equal_nan : (r == o || (finite && diff <= allowed));
    if (close) continue;
    ++rep.mismatches;
    if (opt.top_k == 0) continue;
    // Non-finite mismatches rank worst: their difference is unbounded.
    Ranked m{finite ? diff - allowed : INFINITY, at(i, r, o, std::isnan(diff) ? INFINITY : diff)};
    m.pos.allowed = allowed;
    if (static_cast<int>(worst.size()) < opt.top_k) {
      worst.push(std::move(m));
    } else if (worse(m, worst.top())) {
      worst.pop();
      worst.push(std::move(m));
    }
  }
  if (rep.finite_pairs > 0) rep.mean_abs_diff = abs_sum.value() / static_cast<double>(rep.finite_pairs);
  if (rep.numel > 0) rep.mismatch_percent = 100.0 * static_cast<double>(rep.mismatches) / static_cast<double>(rep.numel);
  rep.pcc = pcc_tt(rep.numel, rd, od);

  for (; !worst.empty(); worst.pop()) rep.worst.push_back(worst.top().pos);
  std::reverse(rep.worst.begin(), rep.worst.end());
  for (auto* p : {&rep.max_abs_diff, &rep.max_rel_diff, &rep.max_ulp})
    if (*p) (*p)->index = unravel((*p)->flat, ref.shape());
  for (Position& p : rep.worst) p.index = unravel(p.flat, ref.shape());
  add_checks(rep, opt);
  return rep;
}

}  // namespace mha::compare
