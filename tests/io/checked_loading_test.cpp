// Issue 22's library pieces, called directly: the checked-size helper
// (util/checked_size.h), the streamed checkpoint index
// (io/checkpoint_index.h) and the hashed Checkpoint (io/checkpoint.h).
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "io/checkpoint.h"
#include "io/checkpoint_index.h"
#include "io/tensor_file.h"
#include "io_test_util.h"
#include "support/test_support.h"
#include "util/checked_size.h"
#include "util/error.h"

using namespace mha;
using namespace mha::test;

namespace {

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CheckedSize, ProductsAndSumsOverflowWithTheOperandsNamed) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(checked_mul(1 << 20, 1 << 20, "a x b"), int64_t{1} << 40);
  EXPECT_EQ(checked_mul(0, kMax, "a x b"), 0);
  EXPECT_EQ(checked_mul(kMax, 1, "a x b"), kMax);
  EXPECT_EQ(checked_add(kMax - 1, 1, "a + b"), kMax);
  EXPECT_EQ(message([] { checked_mul(int64_t{1} << 32, int64_t{1} << 31, field("heads", int64_t{1} << 32) + " x " + field("head_dim", int64_t{1} << 31)); }),
            "heads (4294967296) x head_dim (2147483648) overflows 64-bit sizes");
  EXPECT_EQ(message([&] { checked_add(kMax, 1, "p + t"); }), "p + t overflows 64-bit sizes");
  EXPECT_EQ(message([] { checked_mul(-1, 2, "x"); }), "x: expected non-negative sizes");
}

TEST(CheckedSize, BytesAreCheckedAgainstPhysicalMemory) {
  const int64_t phys = physical_memory_bytes();
  ASSERT_GT(phys, int64_t{1} << 20);
  EXPECT_EQ(check_bytes(1000, 4, "w"), 4000);
  const std::string m = message([&] { check_bytes(phys / 4 + 1, 4, "cache"); });
  EXPECT_NE(m.find("cache: " + std::to_string((phys / 4 + 1) * 4) + " bytes (" + std::to_string(phys / 4 + 1) +
                   " elements of 4 bytes) exceed this machine's " + std::to_string(phys) + " bytes of memory"),
            std::string::npos)
      << m;
  EXPECT_NE(message([] { check_bytes(std::numeric_limits<int64_t>::max(), 8, "x"); }).find("overflows 64-bit sizes"),
            std::string::npos);
}

TEST(CheckpointIndex, StreamsEntriesInFileOrderWithSharedShardPaths) {
  const io::CheckpointIndex ix = io::parse_checkpoint_index(
      R"({"metadata": {"total_size": 3, "nested": {"weight_map": 1}}, "weight_map": {"b": "s1.safetensors", "a": "sub/s2.safetensors", "c": "s1.safetensors"}, "other": [1, {"x": 2}]})",
      "/ck/model.safetensors.index.json");
  EXPECT_EQ(ix.names, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(ix.shard_of, (std::vector<uint32_t>{0, 1, 0}));
  EXPECT_EQ(ix.shards, (std::vector<std::string>{"/ck/s1.safetensors", "/ck/sub/s2.safetensors"}));
}

TEST(CheckpointIndex, MalformedIndexesAreOneLineErrors) {
  const std::string p = "/ck/i.index.json";
  auto err = [&](const std::string& text) { return message([&] { io::parse_checkpoint_index(text, p); }); };
  EXPECT_EQ(err("[1]"), p + ": checkpoint index: expected a JSON object, found an array");
  EXPECT_EQ(err("3"), p + ": checkpoint index: expected a JSON object, found 3");
  EXPECT_EQ(err(R"({"metadata": {}})"),
            p + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found no \"weight_map\" key");
  EXPECT_EQ(err(R"({"weight_map": {}})"),
            p + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found {}");
  EXPECT_NE(err(R"({"weight_map": []})").find("found an array"), std::string::npos);
  EXPECT_EQ(err(R"({"weight_map": {"a": "s"}, "weight_map": {"b": "s"}})"), p + ": checkpoint index: \"weight_map\" appears twice");
  EXPECT_EQ(err(R"({"metadata": 1, "weight_map": {"a": "s"}})"), p + ": checkpoint index: \"metadata\" is not a JSON object, found 1");
  EXPECT_EQ(err(R"({"weight_map": {"a": 5}})"), p + ": weight_map.a: expected a shard file name, found 5");
  EXPECT_EQ(err(R"({"weight_map": {"a": ""}})"), p + ": weight_map.a: expected a shard file name, found \"\"");
  EXPECT_EQ(err(R"({"weight_map": {"a": {"b": 1}}})"), p + ": weight_map.a: expected a shard file name, found an object");
  EXPECT_NE(err(R"({"weight_map": {"a": "../x"}})").find("weight_map.a: shard path \"../x\" leaves the index's folder"),
            std::string::npos);
  EXPECT_NE(err(R"({"weight_map": {"a": "s")").find(p + ": invalid JSON: "), std::string::npos);
  EXPECT_NE(err(std::string(100, '[')).find("checkpoint index nests deeper than 64 levels"), std::string::npos);
  EXPECT_EQ(err(R"({"weight_map": {"a": 1e400}})"), p + ": invalid JSON: [json.exception.out_of_range.406] number overflow parsing '1e400'");
}

TEST(CheckpointIndex, DuplicateTensorsAndHeaderInfoWithoutData) {
  TempDir dir;
  io::write_safetensors(dir.file("s.safetensors"), {{"w", Tensor::from_f32({2, 3}, std::vector<float>(6, 1.0f))}});
  write_text(dir.file("m.safetensors.index.json"), R"({"weight_map": {"w": "s.safetensors", "w": "s.safetensors"}})");
  EXPECT_NE(message([&] { io::Checkpoint ck(dir.file("m.safetensors.index.json")); }).find("tensor 'w' is listed twice"),
            std::string::npos);
  write_text(dir.file("m.safetensors.index.json"), R"({"weight_map": {"w": "s.safetensors", "v": "s.safetensors"}})");
  io::Checkpoint ck(dir.file("m.safetensors.index.json"));
  EXPECT_TRUE(ck.has("w"));
  EXPECT_TRUE(ck.has("v"));
  EXPECT_FALSE(ck.has("u"));
  const io::TensorInfo info = ck.info("w");
  EXPECT_EQ(info.dtype, DType::F32);
  EXPECT_EQ(info.shape, (Shape{2, 3}));
  EXPECT_NE(message([&] { ck.info("v"); }).find("weight_map maps 'v' to shard"), std::string::npos);
  EXPECT_NE(message([&] { ck.read({"u"}); }).find("holds no tensor 'u'"), std::string::npos);
}
