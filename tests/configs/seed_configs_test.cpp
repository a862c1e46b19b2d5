// Every configs/seed*.json reproduces the digits its notebook prints.
// Values are compared as printed: "%.4f" (or "%.4e" where torch switched to
// scientific notation) of mha's output must equal the notebook's text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "io/tensor_file.h"
#include "support/test_support.h"

using namespace mha;
using mha::test::run_mha;
using mha::test::shell_quote;
using mha::test::TempDir;

namespace {

std::string config(const std::string& name) { return test::source_dir() + "/configs/" + name; }

std::string printed(double v, bool sci) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sci ? "%.4e" : "%.4f", v);
  return buf;
}

// Checks the leading elements of `t` (row-major) against printed values.
void expect_printed(const Tensor& t, const std::vector<double>& want, bool sci = false) {
  ASSERT_GE(t.numel(), static_cast<int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(printed(t.get_f64(i), sci), printed(want[i], sci)) << "element " << i;
}

Tensor run_output(const std::string& cfg, const std::string& extra = "", const std::string& backend = "") {
  TempDir dir;
  std::string out = dir.file("out.npy");
  auto r = run_mha("run --config " + shell_quote(config(cfg)) + " -n 1 --output " + shell_quote(out) +
                   (backend.empty() ? "" : " --backend " + backend) + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return io::read_npy(out);
}

}  // namespace

TEST(SeedConfigs, Seed000BookMultiHeadAttention) {
  const std::vector<double> want = {0.3190, 0.4858, 0.2943, 0.3897, 0.2856, 0.3593,
                                    0.2693, 0.3873, 0.2639, 0.3928, 0.2575, 0.4028};
  for (const char* backend : {"reference", "cpu"}) {
    SCOPED_TRACE(backend);
    Tensor out = run_output("seed000_book_mha.json", "", backend);
    ASSERT_EQ(out.shape(), (Shape{2, 6, 2}));
    expect_printed(out, want);
    // Both batch rows hold the same input, so the same output.
    for (int i = 0; i < 12; ++i) EXPECT_EQ(out.get_f64(i), out.get_f64(12 + i));
  }
}

TEST(SeedConfigs, Seed000PrintsLikeTheNotebook) {
  auto r = run_mha("run --config " + shell_quote(config("seed000_book_mha.json")) + " -n 1 --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tensor([[[0.3190, 0.4858],\n         [0.2943, 0.3897],"), std::string::npos) << r.out;
}

TEST(SeedConfigs, Seed003Wrapper) {
  Tensor out = run_output("seed003_wrapper.json");
  ASSERT_EQ(out.shape(), (Shape{2, 6, 4}));
  expect_printed(out, {-0.4519, 0.2216, 0.4772, 0.1063, -0.5874, 0.0058, 0.5891, 0.3257, -0.6300, -0.0632, 0.6202,
                       0.3860, -0.5675, -0.0843, 0.5478, 0.3589, -0.5526, -0.0981, 0.5321, 0.3428, -0.5299, -0.1081,
                       0.5077, 0.3493});
}

TEST(SeedConfigs, Seed003StepByStepStages) {
  TempDir dir;
  auto r = run_mha("run --config " + shell_quote(config("seed003_steps.json")) + " -n 1 --dump-stages " +
                   shell_quote(dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto stage = [&](const char* n) { return io::read_npy(dir.file(std::string(n) + ".npy")); };
  // "Transposed queries" (printed in scientific notation by torch).
  expect_printed(stage("q"), {-3.3182e+00, 4.2931e-01, 3.2498e+00, -4.3869e+00, 1.2290e+00, 4.7963e+00, -1.3072e+00,
                              1.8372e-03, 1.2705e+00, -2.0282e+00, -2.0650e+00, 2.2758e+00},
                 true);
  expect_printed(stage("k"), {1.2777, 2.1052, 1.2342, 2.1467, -1.4555, 0.5085, 0.4384, 0.1270, 0.0256, 1.2710, 1.3911,
                              1.4051, 5.1667, -1.0620, 2.4676, 0.9534, 0.1451, 0.8025});
  expect_printed(stage("v"), {1.1584, 1.9865, -1.2399, 1.3962, 3.1158, -2.7011, 0.1818, 0.7535, -0.8222, 2.4898,
                              -4.1935, 3.7342, 0.1129, -2.2644, -0.2995, 0.5391, -0.8618, 0.7727});
  expect_printed(stage("scores"), {0.6750, -6.0953, -1.3173, 2.9018, -8.7669, -1.6448, -0.0983, -2.1627, -0.5404,
                                   -2.2529, -2.6703, -0.4068, -5.4737, -15.2760, -3.4004, -1.3295, -3.3600, -0.7490});
  Tensor scaled = stage("masked_scores");  // "Scaled attention scores"
  const double inf = INFINITY;
  std::vector<double> want_scaled = {0.3897, -inf, -inf, 1.6754, -5.0615, -inf, -0.0567, -1.2487, -0.3120,
                                     -1.3007, -inf, -inf, -3.1602, -8.8196, -inf, -0.7676, -1.9399, -0.4324};
  for (std::size_t i = 0; i < want_scaled.size(); ++i) {
    if (std::isinf(want_scaled[i])) EXPECT_EQ(scaled.get_f64(i), -inf) << i;
    else EXPECT_EQ(printed(scaled.get_f64(i), false), printed(want_scaled[i], false)) << i;
  }
  expect_printed(stage("weights"), {1.0000, 0.0000, 0.0000, 0.9988, 0.0012, 0.0000, 0.4812, 0.1461, 0.3727, 1.0000,
                                    0.0000, 0.0000, 0.9965, 0.0035, 0.0000, 0.3693, 0.1144, 0.5163});
  // "Combined context vectors" (1, 3, 6).
  expect_printed(stage("context"), {1.1584, 1.9865, -1.2399, 2.4898, -4.1935, 3.7342, 1.1587, 1.9879, -1.2416, 2.4816,
                                    -4.1868, 3.7202, 0.8291, 1.6919, -1.2977, 1.2108, -2.2525, 1.7438});
}

TEST(SeedConfigs, Seed004TorchMultiheadAttention) {
  TempDir dir;
  std::string out = dir.file("out.npy"), w = dir.file("w.npy"), sd = dir.file("sd.safetensors");
  auto r = run_mha("run --config " + shell_quote(config("seed004_torch_mha.json")) + " -n 1 --output " +
                   shell_quote(out) + " --attn-weights " + shell_quote(w) + " --save-weights " + shell_quote(sd));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Tensor in_proj = io::read_tensor(sd + ":in_proj_weight");
  ASSERT_EQ(in_proj.shape(), (Shape{12, 4}));
  expect_printed(in_proj, {0.0888, -0.0024, 0.5353, 0.1906, -0.2281, -0.3698, -0.1026, -0.2641, -0.1962, 0.0293,
                           0.3651, 0.3328, -0.5986, 0.3796, 0.1711, 0.5809, 0.4042, -0.5580, -0.5822, -0.2954,
                           0.5377, -0.1020, 0.2621, -0.2846, 0.6009, -0.2591, 0.4592, 0.0073, -0.3226, 0.3148,
                           -0.3251, 0.1801, -0.1768, -0.0671, -0.5887, -0.2920, 0.3323, -0.1489, 0.6100, 0.4909,
                           -0.0287, -0.4087, 0.3729, 0.1901, -0.3958, 0.3978, 0.3718, 0.5431});
  expect_printed(io::read_npy(out), {-0.1419, 0.5573, -0.0425, -0.2406, -0.1758, 0.5663, -0.0353, -0.2560, -0.2062,
                                     0.6112, -0.0474, -0.2779, -0.1789, 0.5776, -0.0528, -0.2556, -0.1743, 0.5528,
                                     -0.0469, -0.2469, -0.1835, 0.5435, -0.0493, -0.2459, -0.1755, 0.5388, -0.0514,
                                     -0.2401, -0.1663, 0.5134, -0.0536, -0.2267});
  Tensor weights = io::read_npy(w);
  ASSERT_EQ(weights.shape(), (Shape{1, 8, 8}));
  expect_printed(weights, {1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.5267, 0.4733, 0.0000,
                           0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.3607, 0.3203, 0.3190, 0.0000, 0.0000, 0.0000,
                           0.0000, 0.0000, 0.2671, 0.2432, 0.2426, 0.2471, 0.0000, 0.0000, 0.0000, 0.0000, 0.2208,
                           0.1900, 0.1895, 0.1925, 0.2072, 0.0000, 0.0000, 0.0000, 0.1757, 0.1642, 0.1639, 0.1645,
                           0.1703, 0.1613, 0.0000, 0.0000, 0.1585, 0.1371, 0.1363, 0.1437, 0.1519, 0.1343, 0.1381,
                           0.0000, 0.1358, 0.1172, 0.1160, 0.1333, 0.1362, 0.1175, 0.1209, 0.1231});
}
