#pragma once
// Runs PyTorch 1.13 (/usr/bin/python3) as the oracle for the init tests and
// compares mha's tensors with torch's bit for bit.
//
// The Python body calls dump(case, [(name, tensor), ...]); every tensor is
// written as raw little-endian float32 with a manifest line "name d0,d1,...",
// so these tests depend on nothing in src/io.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mha::test {

struct OracleTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};
using OracleCase = std::vector<OracleTensor>;

// The prelude defines dump(), the seed notebooks' module classes (000, 001,
// 003) and their renamed seed-003 twins (CausalAttention003, ...).
std::map<std::string, OracleCase> run_torch_oracle(const std::string& body);
// A bool as the oracle's Python source spells it.
inline std::string py(bool b) { return b ? "True" : "False"; }

// Same names in the same order, same shapes, identical float bits.
::testing::AssertionResult same_bits(const NamedTensors& got, const OracleCase& want);

}  // namespace mha::test
