#pragma once
// What tt-sim decides once per plan: the per-op settings of the spec's op
// sequence (Recipe) after applying the config's options to that sequence's
// TT-NN defaults, the weights as the device holds them, and whether it can
// run the spec at all.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "model/attention.h"

namespace mha::ttsim {

struct Recipe {
  OpSequence pipeline = OpSequence::Book;
  bool fused_qkv = false;
  DataFormat act = DataFormat::Bfloat16;  // host inputs, weights, unspecified op outputs
  DataFormat qkv_out, scores_out, ctx_out, out_out;
  ComputeConfig linear, matmul, softmax;
  MathFidelity eltwise = MathFidelity::HiFi4;
  bool fp32_dest = false;
  bool bfp8_pack_precise = false;  // every op that packs (matmuls, softmax, add, multiply)
  Grid grid;
  bool core_grid = false;  // the matmuls pass core_grid (book, fused) or not (ttnn_mha)
  MemoryKind memory = MemoryKind::L1;
};

Recipe make_recipe(OpSequence ops, const TtOptions& o);
nlohmann::json recipe_json(const Recipe& r);

// Weights as the device holds them: (in, out) tiles, biases as (1, out).
struct DeviceWeights {
  TileTensor wq, wk, wv, wqkv, wo;
  std::optional<TileTensor> bq, bk, bv, bqkv, bo;
  std::optional<TileTensor> bias_k, bias_v;  // (1, Hkv*d) rows
  std::vector<const TileTensor*> all() const;
};

// Host conversion (ttnn.from_torch) of the spec's weights, once per plan:
// (in, out) weights the module stores (Projection::weight_in_out,
// AttentionSpec::qkv_fused) are tiled as they are; others are transposed.
DeviceWeights convert_weights(const AttentionSpec& spec, const Recipe& r);

// Why tt-sim cannot run the spec on these inputs, or nullopt.
std::optional<std::string> tt_supports(const AttentionSpec& spec, const AttentionInputs& in);

}  // namespace mha::ttsim
