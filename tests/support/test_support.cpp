#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mha::test {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "mha-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

// Every test process, and every mha or mpirun it starts, keeps what mha
// stores about the machine (util/user_cache.h: bench probes, decode
// calibration) in a folder of its own, never the user's cache: set before
// any test runs, removed when the process ends. A test of the store itself
// points MHA_CACHE_DIR at its own TempDir.
struct PrivateCacheDir {
  TempDir dir;
  PrivateCacheDir() { ::setenv("MHA_CACHE_DIR", dir.path().c_str(), 1); }
};
const PrivateCacheDir private_cache_dir;

}  // namespace

CommandResult run_command(const std::string& command_line) {
  TempDir dir;
  std::string out = dir.file("out"), err = dir.file("err");
  std::string full = "(" + command_line + ") >" + shell_quote(out) + " 2>" + shell_quote(err) + " </dev/null";
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

CommandResult run_mha(const std::string& args) { return run_command(std::string(MHA_BINARY) + " " + args); }

bool python_package_built() {
  return std::filesystem::exists(std::filesystem::path(MHA_BINARY).parent_path() / "python" / "mha" / "__init__.py");
}

CommandResult run_script_with_mha(const std::string& script_and_args) {
  return run_command("cd " + shell_quote(source_dir()) + " && /usr/bin/python3 scripts/" + script_and_args + " --mha " +
                     shell_quote(MHA_BINARY));
}

CommandResult run_python(const std::string& script) {
  TempDir dir;
  std::string path = dir.file("script.py");
  write_text(path, script);
  return run_command("cd " + shell_quote(source_dir()) + " && /usr/bin/python3 " + shell_quote(path));
}

std::string source_dir() { return MHA_SOURCE_DIR; }
std::string data_file(const std::string& name) { return source_dir() + "/data/" + name; }

void expect_input_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected one line: " << r.err;
}

::testing::AssertionResult tensors_close(const Tensor& a, const Tensor& b, double atol, double rtol) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  std::vector<double> x = a.to_f64(), y = b.to_f64();
  int64_t bad = 0, worst = -1;
  double worst_excess = -1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] == y[i]) continue;  // equal infinities
    double diff = std::fabs(x[i] - y[i]);
    double excess = diff - (atol + rtol * std::fabs(y[i]));
    if (!(excess <= 0)) {
      ++bad;
      if (std::isnan(excess) || excess > worst_excess) { worst_excess = std::isnan(excess) ? 1e300 : excess; worst = static_cast<int64_t>(i); }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << x.size() << " elements differ; worst at flat index "
                                       << worst << ": " << x[worst] << " vs " << y[worst] << " (atol " << atol
                                       << ", rtol " << rtol << ")";
}

Tensor rand_tensor(std::mt19937& g, Shape shape, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = u(g);
  return Tensor::from_f32(std::move(shape), std::move(v));
}

Tensor randn(const Shape& shape, uint32_t seed, float scale, float offset) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = offset + scale * d(g);
  return Tensor::from_f32(shape, std::move(v));
}

Projection rand_proj(std::mt19937& g, int64_t out, int64_t in, bool bias) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  Projection p{rand_tensor(g, {out, in}, -bound, bound), std::nullopt};
  if (bias) p.bias = rand_tensor(g, {out}, -bound, bound);
  return p;
}

Tensor token_rows(const Tensor& x, int64_t r0, int64_t n) {
  const int64_t B = x.dim(0), L = x.dim(1), E = x.dim(2);
  std::vector<float> v(static_cast<size_t>(B * n * E));
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(v.data() + b * n * E, x.data<float>() + (b * L + r0) * E, sizeof(float) * n * E);
  return Tensor::from_f32({B, n, E}, std::move(v));
}

uint32_t test_seed(uint32_t fixed) {
  const char* env = std::getenv("MHA_TEST_SEED");
  uint32_t seed = fixed;
  if (env && std::string(env) == "random")
    seed = std::random_device{}();
  else if (env && *env)
    seed = static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
  std::printf("seed %u (MHA_TEST_SEED=%u replays it)\n", seed, seed);
  return seed;
}

}  // namespace mha::test
