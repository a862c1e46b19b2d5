#pragma once
// The TT-NN attention pipelines tt-sim runs, op by op:
//   "book"  (seed 000's MultiHeadAttention_ttnn, every variant but the two
//           below): linear (core_grid => LoFi) per projection, reshape and
//           permute per head, matmul, * scale, + mask (triu * -1e9 for causal
//           specs, the given additive mask otherwise), softmax, matmul,
//           permute + reshape, linear out_proj then ttnn.add(bias).
//   "ttnn_mha" (seed 002 multi_head_attention): the same ops written with
//           `@` and `+` (no core_grid => HiFi2 matmuls), DRAM by default.
//   "ttnn_mha_fused" (seed 002 optimized): fused QKV linear with bias to
//           bfloat8_b, split heads, q@k to bfloat16, attention_softmax_
//           (scale, mask, softmax), probs@v to bfloat8_b, concatenate heads,
//           output linear with bias to bfloat16.
#include <memory>
#include <optional>
#include <string>

#include "backends/ttsim/ttsim_ops.h"
#include "model/attention.h"

namespace mha::ttsim {

// Per-op settings after applying the config's options to the pipeline's
// TT-NN defaults.
struct Recipe {
  std::string pipeline;  // "book", "ttnn_mha", "ttnn_mha_fused"
  bool fused_qkv = false;
  DataFormat act = DataFormat::Bfloat16;  // host inputs, weights, unspecified op outputs
  DataFormat qkv_out, scores_out, ctx_out, out_out;
  ComputeConfig linear, matmul, softmax;
  MathFidelity eltwise = MathFidelity::HiFi4;
  bool fp32_dest = false;
  Grid grid;
  MemoryKind memory = MemoryKind::L1;
};

Recipe make_recipe(const std::string& variant, const TtOptions& o);
nlohmann::json recipe_json(const Recipe& r);

// Weights as the device holds them: (in, out) tiles, biases as (1, out).
struct DeviceWeights {
  TileTensor wq, wk, wv, wqkv, wo;
  std::optional<TileTensor> bq, bk, bv, bqkv, bo;
  std::optional<TileTensor> bias_k, bias_v;  // (1, Hkv*d) rows
  std::vector<const TileTensor*> all() const;
};

// Host conversion (ttnn.from_torch) of the spec's weights: the "program
// build" work done once per spec.
DeviceWeights convert_weights(const AttentionSpec& spec, const Recipe& r);

// Rejects what tt-sim cannot model, with an InputError saying what.
void check_supported(const AttentionSpec& spec, const AttentionInputs& in);

AttentionResult run_pipeline(TtDevice& dev, const Recipe& r, const DeviceWeights& w, const AttentionSpec& spec,
                             const AttentionInputs& in, const RunOptions& opt);

}  // namespace mha::ttsim
