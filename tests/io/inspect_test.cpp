// `mha inspect` on known files: the table, --json, and the statistics the
// library computes for it.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/inspect.h"
#include "io/tensor_file.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

NamedTensors known_tensors() {
  Tensor ints(DType::I32, {2, 2});
  const int32_t iv[] = {-7, 3, 100, 0};
  std::memcpy(ints.raw(), iv, sizeof iv);
  return {{"w", Tensor::from_f32({2, 3}, {1.5f, -2.0f, NAN, INFINITY, 0.5f, 3.0f})},
          {"idx", ints},
          {"empty", Tensor(DType::F16, {0, 4})},
          {"allnan", Tensor::from_f64({2}, {NAN, -INFINITY})}};
}

TEST(Inspect, StatsCountNanAndInfAndSkipThem) {
  io::TensorStats s = io::tensor_stats("w", known_tensors()[0].second);
  EXPECT_EQ(s.numel, 6);
  EXPECT_EQ(s.finite, 4);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.inf_count, 1);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.mean, 0.75);
}

TEST(Inspect, MeanOfManyValuesIsAccurate) {
  std::vector<float> v(1000001, 0.1f);
  v[0] = 1e8f;
  io::TensorStats s = io::tensor_stats("v", Tensor::from_f32({1000001}, v));
  const double expect = (1e8 + 1e6 * static_cast<double>(0.1f)) / 1000001.0;
  EXPECT_NEAR(s.mean, expect, 1e-9 * expect);
}

TEST(Inspect, TableOnKnownFile) {
  TempDir dir;
  io::write_npz(dir.file("k.npz"), known_tensors());
  CommandResult r = run_mha("inspect " + shell_quote(dir.file("k.npz")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "name    dtype    shape   min  max  mean  nan  inf\n"
            "w       float32  (2, 3)  -2   3    0.75  1    1\n"
            "idx     int32    (2, 2)  -7   100  24    0    0\n"
            "empty   float16  (0, 4)  -    -    -     0    0\n"
            "allnan  float64  (2,)    -    -    -     1    1\n");
}

TEST(Inspect, JsonOnKnownFile) {
  TempDir dir;
  io::write_safetensors(dir.file("k.safetensors"), known_tensors());
  CommandResult r = run_mha("inspect --json " + shell_quote(dir.file("k.safetensors")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["file"], dir.file("k.safetensors"));
  ASSERT_EQ(j["tensors"].size(), 4u);
  // safetensors order: larger dtypes first, then by name.
  EXPECT_EQ(j["tensors"][0]["name"], "allnan");
  const nlohmann::json* w = nullptr;
  for (const auto& t : j["tensors"])
    if (t["name"] == "w") w = &t;
  ASSERT_NE(w, nullptr);
  EXPECT_EQ((*w)["dtype"], "float32");
  EXPECT_EQ((*w)["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ((*w)["numel"], 6);
  EXPECT_EQ((*w)["min"], -2.0);
  EXPECT_EQ((*w)["max"], 3.0);
  EXPECT_EQ((*w)["mean"], 0.75);
  EXPECT_EQ((*w)["nan_count"], 1);
  EXPECT_EQ((*w)["inf_count"], 1);
  EXPECT_TRUE(j["tensors"][0]["min"].is_null());
}

TEST(Inspect, FolderOfNpySortedByNameAndSingleTensorSpec) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("d"));
  io::write_npy(dir.file("d/zeta.npy"), Tensor::from_f32({1}, {2}));
  io::write_npy(dir.file("d/alpha.npy"), Tensor::from_f32({2}, {1, 3}));
  write_text(dir.file("d/notes.txt"), "ignored");
  NamedTensors all = io::read_all(dir.file("d"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, "alpha");
  EXPECT_EQ(all[1].first, "zeta");
  CommandResult r = run_mha("inspect " + shell_quote(dir.file("d")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alpha"), std::string::npos);

  io::write_npz(dir.file("m.npz"), known_tensors());
  r = run_mha("inspect " + shell_quote(dir.file("m.npz") + ":idx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "name  dtype  shape   min  max  mean  nan  inf\nidx   int32  (2, 2)  -7   100  24    0    0\n");
  r = run_mha("inspect " + shell_quote(dir.file("m.npz") + ":nope"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no tensor 'nope'; available: w, idx, empty, allnan"), std::string::npos) << r.err;
}

TEST(Inspect, WritesLeaveNoTemporaryFilesAndReplaceAtomically) {
  TempDir dir;
  io::write_npy(dir.file("x.npy"), Tensor::from_f32({1}, {1}));
  io::write_npy(dir.file("x.npy"), Tensor::from_f32({2}, {4, 5}));
  EXPECT_EQ(io::read_npy(dir.file("x.npy")).numel(), 2);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
  EXPECT_THROW(io::write_npy(dir.file("no/such/dir/x.npy"), Tensor()), InputError);
}

}  // namespace
}  // namespace mha::test
