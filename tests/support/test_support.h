#pragma once
// Helpers shared by every test binary: running the mha binary and
// /usr/bin/python3, temporary folders, and tensor comparison with tolerance.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/attention.h"
#include "tensor/tensor.h"

namespace mha::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line; captures stdout and stderr separately.
CommandResult run_command(const std::string& command_line);
// Runs the mha binary under test with the given argument string.
CommandResult run_mha(const std::string& args);
// Runs Debian's /usr/bin/python3 (where torch and numpy import) on a script text.
CommandResult run_python(const std::string& script);
std::string source_dir();  // the repository root
// Whether the Python package `mha` was built beside the binary under test
// (BUILD/python/mha: CMake builds it when python3-dev and pybind11-dev are
// installed); the scripts that run ops in process need it.
bool python_package_built();
// Runs `/usr/bin/python3 scripts/SCRIPT_AND_ARGS --mha <the binary under
// test>` from the repository root: the studies that drive mha through the
// Python package and the binary (scripts/ttsim_accuracy.py, ...).
CommandResult run_script_with_mha(const std::string& script_and_args);
// The fixture of a test of such a script: skipped where the Python package
// was not built (`using SuiteName = PythonPackageScriptTest;` keeps the
// suite's name).
class PythonPackageScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_package_built()) GTEST_SKIP() << "the script runs its ops through the Python package, not built here";
  }
};
std::string data_file(const std::string& name);  // <repository>/data/<name>
// A fresh empty folder, removed when the TempDir is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
std::string shell_quote(const std::string& s);
// Expects what bad input gives: exit code 2 and one line on stderr, holding `needle`.
void expect_input_error(const CommandResult& r, const std::string& needle);

// Expects equal shapes and |a - b| <= atol + rtol * |b| elementwise (NaN
// matches NaN); reports the worst element on failure.
::testing::AssertionResult tensors_close(const Tensor& a, const Tensor& b, double atol, double rtol);

// float32 tensor of uniform values in [lo, hi) from g.
Tensor rand_tensor(std::mt19937& g, Shape shape, float lo, float hi);
// float32 tensor of offset + scale * (standard normal values from a
// generator seeded with seed).
Tensor randn(const Shape& shape, uint32_t seed, float scale = 1.0f, float offset = 0.0f);
// A projection [out, in] (and bias [out]) uniform in +-1/sqrt(in), as
// nn.Linear initialises one.
Projection rand_proj(std::mt19937& g, int64_t out, int64_t in, bool bias);
// The seed of a randomised test: `fixed`, so that the test command gives the
// same verdict on every run; MHA_TEST_SEED=N replays seed N and
// MHA_TEST_SEED=random draws one (printed either way) to explore further.
uint32_t test_seed(uint32_t fixed);
// Tokens [r0, r0 + n) of a float32 x [B, L, E]: what one decode append takes.
Tensor token_rows(const Tensor& x, int64_t r0, int64_t n);

}  // namespace mha::test
