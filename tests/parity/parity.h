#pragma once
// PyTorch (scripts/torch_oracle.py) against `mha run` on whole configs.
//
// A Case is a config plus Python lines that write its .npy files. run_cases
// writes every case into one TempDir, runs the Python set-up once and the
// oracle once per dtype (importing torch costs seconds), then runs
// `mha run --backend reference` and `--backend cpu` on each case and checks:
//   weights   mha's --save-weights equals torch's state_dict bit for bit
//   reference float64 output within rtol 1e-9, atol 1e-12 of torch float64
//   cpu       float32 output within torch.testing's float32 tolerances
//   weights   the attention weights likewise, when torch returns them
// Shapes and options are drawn from a seed printed with every failure;
// MHA_PARITY_SEED=N replays one.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mha::test {

using json = nlohmann::ordered_json;

struct Case {
  std::string name;  // for messages; also the case's folder name
  json config;       // variant, params, weights, inputs, options
  // Python run with the case folder as cwd; `rng` (numpy Generator) and
  // f32(shape, scale=1.0) are defined. Writes the files `config` names.
  std::string setup;
  // When set, a file the set-up wrote with the output of the module it
  // exported: both backends must match it within float32 tolerances.
  std::string expected;
};

class Rng {
 public:
  // From MHA_PARITY_SEED when set, else std::random_device.
  Rng();
  uint64_t seed() const { return seed_; }
  int64_t uniform(int64_t lo, int64_t hi);  // inclusive
  bool coin(double p = 0.5);
  template <class T> const T& pick(const std::vector<T>& xs) { return xs[uniform(0, int64_t(xs.size()) - 1)]; }
  uint64_t draw_seed() { return uniform(0, 1 << 30); }
  // "replay with MHA_PARITY_SEED=..." for SCOPED_TRACE.
  std::string trace() const;

 private:
  uint64_t seed_;
  std::mt19937_64 gen_;
};

// Python literal of a shape: (2, 3) or (4,).
std::string py_shape(const std::vector<int64_t>& shape);

// Runs everything and adds a gtest failure per mismatch. `prelude` is
// Python run once before the cases' set-up (shared definitions).
void run_cases(const std::vector<Case>& cases, uint64_t seed, const std::string& prelude = "");

}  // namespace mha::test
