#include "parity/parity.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {

namespace fs = std::filesystem;

Rng::Rng() {
  const char* env = std::getenv("MHA_PARITY_SEED");
  seed_ = env ? std::strtoull(env, nullptr, 10) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  gen_.seed(seed_);
}

int64_t Rng::uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
bool Rng::coin(double p) { return std::bernoulli_distribution(p)(gen_); }
std::string Rng::trace() const {
  return "parity seed " + std::to_string(seed_) + " (replay with MHA_PARITY_SEED=" + std::to_string(seed_) + ")";
}

std::string py_shape(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

const char* kOracle32 = "torch32";
const char* kOracle64 = "torch64";

std::string setup_prelude(uint64_t seed) {
  return "import os\nimport numpy as np\nrng = np.random.default_rng(" + std::to_string(seed) +
         ")\n"
         "def f32(shape, scale=1.0):\n"
         "    return (scale * rng.standard_normal(shape)).astype(np.float32)\n";
}

// Same names, shapes and dtypes, identical bytes.
::testing::AssertionResult same_bits(const std::string& mha_path, const std::string& torch_path) {
  std::map<std::string, Tensor> got, want;
  for (auto& [n, t] : io::read_all(mha_path)) got[n] = t;
  for (auto& [n, t] : io::read_all(torch_path)) want[n] = t;
  std::string names_got, names_want;
  for (const auto& [n, t] : got) names_got += " " + n;
  for (const auto& [n, t] : want) names_want += " " + n;
  if (names_got != names_want)
    return ::testing::AssertionFailure() << "state_dict names differ: mha" << names_got << " vs torch" << names_want;
  for (const auto& [n, t] : want) {
    const Tensor& g = got.at(n);
    if (g.shape() != t.shape() || g.dtype() != t.dtype())
      return ::testing::AssertionFailure() << n << ": mha " << shape_str(g.shape()) << " " << dtype_name(g.dtype())
                                           << " vs torch " << shape_str(t.shape()) << " " << dtype_name(t.dtype());
    if (std::memcmp(g.raw(), t.raw(), t.nbytes()) != 0) {
      std::vector<double> a = g.to_f64(), b = t.to_f64();
      const std::size_t es = dtype_size(t.dtype());
      std::size_t i = 0;
      while (i < a.size() && std::memcmp(g.raw() + i * es, t.raw() + i * es, es) == 0) ++i;
      return ::testing::AssertionFailure() << n << ": bits differ first at flat index " << i << ": mha " << a[i]
                                           << " vs torch " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

bool run_ok(const CommandResult& r, const std::string& what) {
  if (r.exit_code == 0) return true;
  ADD_FAILURE() << what << " failed (exit " << r.exit_code << "):\n" << r.out << r.err;
  return false;
}

// Runs one backend on the case; false (with a failure added) if mha failed.
bool run_backend(const std::string& dir, const std::string& backend, bool weights) {
  std::string args = "run -n 1 --config " + shell_quote(dir + "/config.json") + " --backend " + backend +
                     " --output " + shell_quote(dir + "/" + backend + "_out.npy");
  if (weights) args += " --attn-weights " + shell_quote(dir + "/" + backend + "_w.npy");
  if (backend == "reference") args += " --save-weights " + shell_quote(dir + "/mha_weights.safetensors");
  return run_ok(run_mha(args), "mha " + args);
}

void check_case(const Case& c, const std::string& dir) {
  SCOPED_TRACE("case " + c.name + ": " + c.config.dump());
  const bool has_weights = fs::exists(dir + "/" + kOracle32 + "/attn_weights.npy");
  auto load = [&](const std::string& name) { return io::read_tensor(dir + "/" + name); };
  const std::string t32 = std::string(kOracle32) + "/", t64 = std::string(kOracle64) + "/";
  struct Pair { const char* what; std::string mine, theirs; };  // mha's file suffix, the oracle's file
  std::vector<Pair> pairs = {{"output", "_out.npy", "output.npy"}};
  if (has_weights) pairs.push_back({"attention weights", "_w.npy", "attn_weights.npy"});

  if (run_backend(dir, "reference", has_weights)) {
    EXPECT_TRUE(same_bits(dir + "/mha_weights.safetensors", dir + "/" + t32 + "weights.safetensors"));
    for (const Pair& p : pairs)
      EXPECT_TRUE(tensors_close(load("reference" + p.mine), load(t64 + p.theirs), 1e-12, 1e-9))
          << "reference backend " << p.what << " vs torch float64";
  }
  if (run_backend(dir, "cpu", has_weights)) {
    for (const Pair& p : pairs) {
      Tensor cpu = load("cpu" + p.mine), want32 = load(t32 + p.theirs), want64 = load(t64 + p.theirs);
      // On a miss, say how far torch float32 itself is from float64, so a
      // reader can tell an mha error from an ill-conditioned case.
      EXPECT_TRUE(tensors_close(cpu, want32, 1e-5, 1.3e-6))
          << "cpu backend " << p.what << " vs torch float32; cpu vs torch float64: "
          << tensors_close(cpu, want64, 1e-5, 1.3e-6).message()
          << "; torch float32 vs float64: " << tensors_close(want32, want64, 1e-5, 1.3e-6).message();
    }
  }
  if (c.expected.empty()) return;
  for (const std::string backend : {"reference", "cpu"}) {
    if (!fs::exists(dir + "/" + backend + "_out.npy")) continue;  // its failure is already reported
    EXPECT_TRUE(tensors_close(load(backend + "_out.npy"), load(c.expected), 1e-5, 1.3e-6))
        << backend << " output vs the exported module's own output";
  }
}

}  // namespace

void run_cases(const std::vector<Case>& cases, uint64_t seed, const std::string& prelude) {
  TempDir root;
  std::string setup = setup_prelude(seed) + prelude, oracle_args;
  bool any_setup = false;
  std::vector<std::string> dirs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string dir = root.file("c" + std::to_string(i));
    fs::create_directories(dir);
    json cfg = cases[i].config;
    cfg["name"] = cases[i].name;
    cfg["backend"] = {{"name", "reference"}};
    cfg["runs"] = {{"warmup", 0}, {"iterations", 1}};
    write_text(dir + "/config.json", cfg.dump(2));
    if (!cases[i].setup.empty()) {
      setup += "os.chdir(" + json(dir).dump() + ")\n" + cases[i].setup + "\n";
      any_setup = true;
    }
    oracle_args += " --config " + shell_quote(dir + "/config.json") + " --out " + shell_quote(dir + "/%D");
    dirs.push_back(dir);
  }
  if (any_setup && !run_ok(run_python(setup), "python set-up:\n" + setup)) return;

  auto oracle = [&](const char* dtype, const char* sub) {
    std::string a = oracle_args;
    for (std::size_t p; (p = a.find("%D")) != std::string::npos;) a.replace(p, 2, sub);
    std::string with_dtype;
    for (std::size_t i = 0; i < cases.size(); ++i) with_dtype += std::string(" --dtype ") + dtype;
    return with_dtype + a;
  };
  // Both dtypes in one process: torch's import is most of its time.
  std::string cmd = "cd " + shell_quote(source_dir()) + " && /usr/bin/python3 scripts/torch_oracle.py" +
                    oracle("float32", kOracle32) + oracle("float64", kOracle64);
  if (!run_ok(run_command(cmd), "torch oracle")) return;
  for (std::size_t i = 0; i < cases.size(); ++i) check_case(cases[i], dirs[i]);
}

}  // namespace mha::test
