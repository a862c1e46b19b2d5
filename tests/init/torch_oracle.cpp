#include "init/torch_oracle.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace mha::test {
namespace {

// Class bodies copied from the seed notebooks' __init__ methods; forward()
// is left out because only construction draws matter here.
const char* kPrelude = R"PY(
import math, os, sys
import numpy as np
import torch
from torch import nn

_cases = []

def dump(case, named):
    with open(os.path.join(OUT, case + '.bin'), 'wb') as f:
        for _, t in named:
            f.write(t.detach().contiguous().numpy().astype('<f4').tobytes())
    with open(os.path.join(OUT, case + '.txt'), 'w') as m:
        for name, t in named:
            m.write(name + ' ' + ','.join(str(d) for d in t.shape) + '\n')
    _cases.append(case)

def sd(module):
    return list(module.state_dict().items())

# Seeds 000, 001 and 003: the oracle's own copies of the notebook classes (their
# constructors decide the draws).
sys.path.insert(0, os.path.join(os.getcwd(), 'scripts'))  # run_python runs in the repository root
from torch_oracle import CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention, MultiHeadAttentionV2
from torch_oracle import AiEdgeMultiHeadAttention as MultiHeadAttention001

# seed 003 (its buffers are not weights: dropped from the dumps)
from torch_oracle import CausalAttention003, MultiHeadAttention003
)PY";

std::vector<float> read_floats(const std::string& path) {
  std::string bytes = read_text(path);
  std::vector<float> v(bytes.size() / 4);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + 4 * i);
    uint32_t u = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

}  // namespace

std::map<std::string, OracleCase> run_torch_oracle(const std::string& body) {
  TempDir dir;
  const std::string script = std::string(kPrelude) + "\nOUT = " + "'" + dir.path() + "'\n" + body +
                             "\nprint('\\n'.join(_cases))\n";
  CommandResult r = run_python(script);
  if (r.exit_code != 0) throw std::runtime_error("torch oracle failed: " + r.err);
  std::map<std::string, OracleCase> cases;
  std::istringstream names(r.out);
  for (std::string c; std::getline(names, c);) {
    if (c.empty()) continue;
    std::vector<float> all = read_floats(dir.file(c + ".bin"));
    std::istringstream manifest(read_text(dir.file(c + ".txt")));
    OracleCase oc;
    std::size_t at = 0;
    for (std::string line; std::getline(manifest, line);) {
      OracleTensor t;
      std::istringstream ls(line);
      std::string dims;
      ls >> t.name >> dims;
      std::istringstream ds(dims);
      for (std::string d; std::getline(ds, d, ',');) t.shape.push_back(std::stoll(d));
      const auto n = static_cast<std::size_t>(shape_numel(t.shape));
      if (at + n > all.size()) throw std::runtime_error("torch oracle: short data for case " + c);
      t.values.assign(all.begin() + at, all.begin() + at + n);
      at += n;
      oc.push_back(std::move(t));
    }
    cases[c] = std::move(oc);
  }
  return cases;
}

::testing::AssertionResult same_bits(const NamedTensors& got, const OracleCase& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " tensors vs torch's " << want.size();
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto& [name, t] = got[k];
    const OracleTensor& w = want[k];
    if (name != w.name) return ::testing::AssertionFailure() << "tensor " << k << ": " << name << " vs " << w.name;
    if (t.dtype() != DType::F32) return ::testing::AssertionFailure() << name << ": not float32";
    if (t.shape() != w.shape)
      return ::testing::AssertionFailure() << name << ": shape " << shape_str(t.shape()) << " vs "
                                           << shape_str(w.shape);
    const float* p = t.data<float>();
    int64_t bad = 0, first = -1;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      if (std::memcmp(&p[i], &w.values[i], 4) != 0 && bad++ == 0) first = static_cast<int64_t>(i);
    if (bad)
      return ::testing::AssertionFailure() << name << ": " << bad << " of " << w.values.size()
                                           << " values differ in bits; first at " << first << ": "
                                           << p[first] << " vs " << w.values[first];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mha::test
