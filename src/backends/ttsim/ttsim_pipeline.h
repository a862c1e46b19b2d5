#pragma once
// The TT-NN attention pipelines tt-sim runs, one function per TT-NN op of
// the seeds (ttsim_pipeline.cpp), in the order the spec's OpSequence gives:
//   Book    (seed 000's MultiHeadAttention_ttnn): linear (core_grid => LoFi)
//           per projection, reshape + permute per head, matmul, * scale,
//           + mask (triu * -1e9 for causal specs, the given additive mask
//           otherwise), softmax, matmul, permute + reshape, linear out_proj
//           then ttnn.add(bias).
//   TtnnMha (seed 002's multi_head_attention): the same ops written with
//           `@` and `+` (no core_grid => HiFi2 matmuls), DRAM by default.
//   TtnnMhaFused (seed 002 optimised): fused QKV linear with bias to
//           bfloat8_b, split heads, q@k to bfloat16, attention_softmax_
//           (scale, mask, softmax), probs@v to bfloat8_b, concatenate heads,
//           output linear with bias to bfloat16.
#include "backends/ttsim/ttsim_recipe.h"

namespace mha::ttsim {

// One forward pass on the emulated device; the spec must pass tt_supports.
AttentionResult run_pipeline(TtDevice& dev, const Recipe& r, const DeviceWeights& w, const AttentionSpec& spec,
                             const AttentionInputs& in, const RunOptions& opt);

}  // namespace mha::ttsim
