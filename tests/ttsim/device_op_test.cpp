// The frame every tt-sim op runs in (backends/ttsim/ops/device_op.h) and the
// field lists (util/fields.h) its attributes and options are declared by:
// program keys from the fields, runtime arguments left out of them, the CB
// budget, the parsers' messages and the flags `mha op` generates.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"
#include "backends/ttsim/ops/softmax/softmax.h"
#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "backends/ttsim/ttsim_options.h"
#include "util/error.h"
#include "util/fields.h"

namespace mha::ttsim {
namespace {

using json = nlohmann::ordered_json;


std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct Example {
  int64_t chunk = 32;
  bool causal = true;
  std::optional<float> scale;
  std::vector<int64_t> cur_pos;
  template <class V>
  void fields(V& v) {
    v("chunk", chunk, "rows per chunk");
    v("causal", causal, "causal or not");
    v("scale", scale, "the scale (default 1/sqrt(dh))");
    v("cur_pos", cur_pos, "positions", fields::kRuntime);
  }
};

TEST(Fields, OneListGivesKeyJsonHelpAndParser) {
  Example e;
  e.cur_pos = {3, 4};
  // The key leaves runtime arguments out; the report has every field.
  EXPECT_EQ(fields::key_of(e), "chunk=32,causal=1,scale=none");
  EXPECT_EQ(fields::json_of(e).dump(), R"({"chunk":32,"causal":true,"scale":null,"cur_pos":[3,4]})");
  fields::HelpVisitor h;
  e.fields(h);
  ASSERT_EQ(h.lines.size(), 4u);
  EXPECT_EQ(h.lines[0].second, "rows per chunk (default 32)");
  EXPECT_EQ(h.lines[2].second, "the scale (default 1/sqrt(dh))");  // its own words kept

  Example p;
  fields::parse_into(p, json{{"chunk", 64}, {"scale", 0.5}, {"cur_pos", {1, 2}}}, "op options", "example option");
  EXPECT_EQ(p.chunk, 64);
  EXPECT_EQ(*p.scale, 0.5f);
  EXPECT_EQ(p.cur_pos, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(error_of([&] { fields::parse_into(p, json{{"causal", "maybe"}}, "op options", "example option"); }),
            "op options.causal: expected true or false, found \"maybe\"");
  EXPECT_EQ(error_of([&] { fields::parse_into(p, json{{"cur_pos", json::array()}}, "op options", "example option"); }),
            "op options.cur_pos: expected an array of integers (at least one), found []");
  EXPECT_EQ(error_of([&] { fields::parse_into(p, json{{"chunks", 1}}, "op options", "example option"); }),
            "op options.chunks: unknown example option (expected one of chunk, causal, scale, cur_pos), found 1");
}

// tt-sim's options come from TtOptions' one field list: the unknown-key
// message lists every key, help has one line per key.
TEST(Fields, TtOptionsFromTheirFieldList) {
  const std::string e = error_of([] { parse_tt_options(json{{"colour", 1}}, "backend"); });
  EXPECT_TRUE(contains(e, "backend.colour: unknown tt-sim option (expected one of device, dtype, math_fidelity"))
      << e;
  EXPECT_TRUE(contains(e, "kv_cache_dtype, threads, kernels), found 1")) << e;
  const std::string help = tt_options_help();
  for (const char* key : {"device", "core_grid", "numerics", "threads", "kernels"})
    EXPECT_TRUE(contains(help, std::string("  ") + key + ": ")) << help;
  EXPECT_EQ(error_of([] { parse_tt_options(json{{"device", "blackhole"}, {"core_grid", {11, 1}}}, "backend"); }),
            "backend.core_grid: expected [y, x] with 1 <= y <= 10 and 1 <= x <= 13 (blackhole), found [11,1]");
  const TtOptions o = parse_tt_options(json{{"name", "tt-sim"}, {"core_grid", {2, 3}}, {"threads", 2}}, "backend");
  ASSERT_TRUE(o.core_grid.has_value());
  EXPECT_EQ(o.core_grid->y, 2);
  EXPECT_EQ(o.host.threads, 2);
}

// `mha op`'s --chunk-start-idx, --page-table, --cur-pos, --update-idx,
// --batch-offset and --batch-idx are the ops' own fields, each once, naming
// the ops that take it.
TEST(Fields, OpFlagsComeFromTheOpsFields) {
  std::vector<std::string> keys;
  for (const OpParam& p : tt_op_flags()) {
    keys.push_back(p.key);
    if (p.key == "cur_pos") {
      EXPECT_TRUE(contains(p.help, "sdpa-decode, flash-mla-decode, update-cache, paged-fused-update-cache: ")) << p.help;
    }
    if (p.key == "page_table") {
      EXPECT_EQ(p.flag, FlagKind::TableFile);
      EXPECT_TRUE(contains(p.help, "chunked-sdpa, chunked-flash-mla-prefill, sdpa-decode, flash-mla-decode, update-cache, "
                                   "paged-fused-update-cache, paged-fill-cache: "))
          << p.help;
    }
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"chunk_start_idx", "page_table", "cur_pos", "update_idx", "batch_offset",
                                            "batch_idx"}));
  EXPECT_EQ(op_flag_name("batch_offset"), "--batch-offset");
}

// SDPA decode's program is keyed on its whole compute config (fp32 Dst and
// approx mode too) and not on cur_pos, a runtime argument.
TEST(DeviceOp, SdpaDecodeKeyHasTheComputeConfigAndNotThePositions) {
  TtDevice dev(parse_tt_options(json::object(), "backend"));
  dev.set_memory(MemoryKind::DRAM);
  const TileTensor q = make_tile_tensor({1, 1, 8, 64}, DataFormat::Bfloat16);
  const TileTensor k = make_tile_tensor({1, 1, 128, 64}, DataFormat::Bfloat16);
  SdpaDecodeConfig c;
  run_sdpa_decode(dev, q, k, k, {5}, nullptr, c);
  run_sdpa_decode(dev, q, k, k, {9}, nullptr, c);  // a hit: positions are runtime args
  c.compute.fp32_dest_acc_en = true;
  run_sdpa_decode(dev, q, k, k, {9}, nullptr, c);
  c.compute.math_approx_mode = false;
  run_sdpa_decode(dev, q, k, k, {9}, nullptr, c);
  const std::vector<std::string> keys = dev.program_keys();
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(dev.stats().hits, 1);
  for (const std::string& key : keys) EXPECT_TRUE(contains(key, "fp32_dest_acc_en=") && contains(key, "math_approx_mode="));
}

// Every op with circular buffers checks them against one core's L1, in
// DRAM too: softmax holds a whole row of tiles per core.
TEST(DeviceOp, CircularBuffersOverL1AreRefused) {
  TtDevice dev(parse_tt_options(json::object(), "backend"));
  dev.set_memory(MemoryKind::DRAM);
  const TileTensor wide = make_tile_tensor({32, 32768}, DataFormat::Bfloat16);
  SoftmaxAttributes at{softmax_default_config()};
  try {
    run_softmax(dev, "ttnn.softmax", wide, at);
    FAIL() << "ran";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_TRUE(contains(e.what(), "ttnn.softmax: the program's circular buffers need")) << e.what();
    EXPECT_TRUE(contains(e.what(), "of L1 on wormhole_b0")) << e.what();
  }
  const TileTensor narrow = make_tile_tensor({32, 1024}, DataFormat::Bfloat16);
  EXPECT_NO_THROW(run_softmax(dev, "ttnn.softmax", narrow, at));
}

}  // namespace
}  // namespace mha::ttsim
