#include "oracle.h"

#include <cmath>

#include "compare/report.h"
#include "support/test_support.h"

namespace mha::test {

namespace {

// Written from the definitions in docs/COMPARE.md and tt-metal's comp_pcc
// rules, with numpy/torch doing the arithmetic; it shares no code with mha.
const char* kOracle = R"PY(
import json, numpy as np
np.seterr(all='ignore')


def enc(v):
    v = float(v)
    return 'nan' if np.isnan(v) else 'inf' if v == np.inf else '-inf' if v == -np.inf else v

def metrics(spec):
    shape = tuple(spec['shape'])

    def load(path, dt):  # as float64
        if dt == 'bfloat16':
            import torch  # only cases with bfloat16 pay for importing torch
            return torch.from_numpy(np.fromfile(path, dtype=np.int16)).view(torch.bfloat16).double().numpy()
        return np.fromfile(path, dtype=np.dtype(dt)).astype(np.float64)

    as_dt = spec['as_dtype']
    cmp_dt = as_dt or spec['ref_dtype']
    def round_to(x, dt):  # through float32, as mha and torch cast
        if dt == 'bfloat16':
            import torch
            return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).double().numpy()
        return x.astype(np.float32).astype(np.dtype(dt)).astype(np.float64) if dt != 'float64' else x
    def cast(x):
        return x if as_dt is None else round_to(x, as_dt)
    r = cast(load(spec['ref'], spec['ref_dtype']))
    o = cast(load(spec['out'], spec['out_dtype']))

    def first_max(vals, mask):
        if not mask.any():
            return None
        i = int(np.argmax(np.where(mask, vals, -np.inf)))
        return {'value': enc(vals[i]), 'index': [int(k) for k in np.unravel_index(i, shape)],
                'ref': enc(r[i]), 'out': enc(o[i])}

    fin = np.isfinite(r) & np.isfinite(o)
    both_nan = np.isnan(r) & np.isnan(o)
    d = np.abs(o - r)
    rel = np.where(d == 0, 0.0, d / np.abs(r))

    def ordinal(x):
        if cmp_dt == 'float64':
            bits, w = x.view(np.int64), 64
        elif cmp_dt == 'bfloat16':  # the upper half of the float32 pattern
            bits, w = (round_to(x, 'bfloat16').astype(np.float32).view(np.int32) >> 16).astype(np.int64), 16
        else:
            w = {'float16': 16, 'float32': 32}[cmp_dt]
            bits = x.astype(np.float32).astype(np.dtype(cmp_dt)).view({16: np.int16, 32: np.int32}[w]).astype(np.int64)
        mag = bits & ((1 << (w - 1)) - 1)
        return [int(m) if b >= 0 else -int(m) for b, m in zip(bits, mag)]

    if cmp_dt in ('float16', 'bfloat16', 'float32', 'float64'):
        ulp = np.array([float(abs(a - b)) for a, b in zip(ordinal(r), ordinal(o))], dtype=np.float64)
    else:
        ulp = np.abs(r - o)
    ulp = np.where(np.isnan(r) | np.isnan(o), np.where(both_nan, 0.0, np.inf), ulp)

    def comp_pcc(g, c):
        if np.all(np.isnan(g)) and np.all(np.isnan(c)): return 1.0
        if np.all(np.isnan(g)) or np.all(np.isnan(c)): return 0.0
        if np.any(g != 0) != np.any(c != 0): return 0.0
        g = np.where(np.isfinite(g), g, 0.0)
        c = np.where(np.isfinite(c), c, 0.0)
        if np.array_equal(g, c): return 1.0
        if g.size == 1: return 0.0
        if g.min() == g.max() and c.min() == c.max():
            return 1.0 if np.isclose(g.max(), c.max(), rtol=1e-5, atol=1e-8) else 0.0
        m = np.ma.corrcoef(np.ma.masked_invalid(g), np.ma.masked_invalid(c))
        v = np.min(m[~np.eye(2, dtype=bool)])  # the self-correlations are left out
        return 1.0 if v is np.ma.masked else float(v)

    close = np.isclose(o, r, rtol=spec['rtol'], atol=spec['atol'], equal_nan=spec['equal_nan'])
    allowed = spec['atol'] + spec['rtol'] * np.abs(r)
    excess = np.where(fin, d - allowed, np.inf)
    bad = [int(i) for i in np.nonzero(~close)[0]]
    worst = sorted(bad, key=lambda i: (-excess[i], i))[:spec['top_k']]

    def side(x):
        return {'nan': int(np.isnan(x).sum()), 'pos_inf': int((x == np.inf).sum()), 'neg_inf': int((x == -np.inf).sum())}

    return {
        'ref': side(r), 'out': side(o), 'numel': int(r.size),
        'finite_pairs': int(fin.sum()),
        'nonfinite_mismatches': int((~fin & ~both_nan & (r != o)).sum()),
        'max_abs_diff': first_max(d, fin),
        'mean_abs_diff': float(d[fin].mean()) if fin.any() else None,
        'max_rel_diff': first_max(rel, fin),
        'pcc': comp_pcc(r, o),
        'max_ulp': first_max(ulp, np.ones(r.size, dtype=bool)),
        'mismatches': len(bad),
        'worst': [[int(k) for k in np.unravel_index(i, shape)] for i in worst],
    }

print(json.dumps([metrics(s) for s in json.load(open(SPEC))]))
)PY";

void write_raw(const std::string& path, const Tensor& t) {
  write_text(path, std::string(reinterpret_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace

std::vector<nlohmann::json> numpy_metrics(const std::vector<OracleCase>& cases) {
  TempDir dir;
  nlohmann::json specs = nlohmann::json::array();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const OracleCase& c = cases[k];
    std::string ref = dir.file("ref" + std::to_string(k)), out = dir.file("out" + std::to_string(k));
    write_raw(ref, c.ref);
    write_raw(out, c.out);
    DType cmp = c.opt.as_dtype.value_or(c.ref.dtype());
    compare::Tolerance def = compare::default_tolerance(cmp);
    specs.push_back({{"ref", ref}, {"out", out}, {"shape", c.ref.shape()},
                     {"ref_dtype", dtype_name(c.ref.dtype())}, {"out_dtype", dtype_name(c.out.dtype())},
                     {"as_dtype", c.opt.as_dtype ? nlohmann::json(dtype_name(*c.opt.as_dtype)) : nlohmann::json(nullptr)},
                     {"rtol", c.opt.rtol.value_or(def.rtol)}, {"atol", c.opt.atol.value_or(def.atol)},
                     {"equal_nan", c.opt.equal_nan}, {"top_k", c.opt.top_k}});
  }
  write_text(dir.file("spec.json"), specs.dump());
  CommandResult res = run_python("SPEC = " + nlohmann::json(dir.file("spec.json")).dump() + "\n" + kOracle);
  if (res.exit_code != 0) throw std::runtime_error("numpy oracle failed: " + res.err);
  return nlohmann::json::parse(res.out).get<std::vector<nlohmann::json>>();
}

void expect_matches_numpy(const OracleCase& c, const nlohmann::json& want) {
  nlohmann::json got = compare::to_json(compare::compare(c.ref, c.out, c.opt));
  for (const char* side : {"ref", "out"})
    for (const char* k : {"nan", "pos_inf", "neg_inf"}) EXPECT_EQ(got[side][k], want[side][k]) << side << "." << k;
  for (const char* k : {"numel", "finite_pairs", "nonfinite_mismatches", "max_abs_diff", "max_rel_diff", "max_ulp"})
    EXPECT_EQ(got[k], want[k]) << k;
  EXPECT_EQ(got["allclose"]["mismatches"], want["mismatches"]);
  nlohmann::json worst = nlohmann::json::array();
  for (const auto& w : got["allclose"]["worst"]) worst.push_back(w["index"]);
  EXPECT_EQ(worst, want["worst"]);
  if (want["mean_abs_diff"].is_null()) {
    EXPECT_TRUE(got["mean_abs_diff"].is_null());
  } else {
    double m = want["mean_abs_diff"].get<double>();
    EXPECT_NEAR(got["mean_abs_diff"].get<double>(), m, 1e-12 * std::fabs(m) + 1e-300);
  }
  EXPECT_NEAR(got["pcc"].get<double>(), want["pcc"].get<double>(), 1e-12);
}

}  // namespace mha::test
