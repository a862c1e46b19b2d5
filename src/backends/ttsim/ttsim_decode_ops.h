#pragma once
// The decode-time TT-NN ops from host tensors, for `mha op`: SDPA decode
// (ttnn.transformer.scaled_dot_product_attention_decode and the paged
// variant), the KV cache writes (ttnn.fill_cache, ttnn.update_cache,
// ttnn.experimental.paged_update_cache) and Llama's rotary embedding
// (ttnn.experimental.rotary_embedding_llama). Inputs are converted as
// ttnn.from_torch(dtype, TILE_LAYOUT) converts them; page tables and
// positions are integers. The numerics live in src/ttsim/ (sdpa_decode.h,
// kv_cache.h, rotary_llama.h); this file maps TT-NN's arguments onto them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ttsim_single_op.h"

namespace mha::ttsim {

enum class DecodeOp { SdpaDecode, UpdateCache, FillCache, RotaryLlama };

// "sdpa-decode", "update-cache", "fill-cache", "rotary-llama".
std::optional<DecodeOp> decode_op_from_name(const std::string& name);
const char* decode_op_name(DecodeOp op);
const char* decode_op_operands(DecodeOp op);  // e.g. "Q K V [PAGE_TABLE]"

struct DecodeOpRequest {
  DecodeOp op = DecodeOp::SdpaDecode;
  std::vector<OpInput> inputs;
  // The tt-sim backend object plus the op's program config keys
  // (k_chunk_size, exp_approx_mode, max_cores_per_head_batch, scale).
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  std::optional<DataFormat> output_dtype;
  std::vector<int64_t> cur_pos;          // sdpa-decode; update-cache (paged_update_cache)
  std::optional<int64_t> update_idx;     // update-cache (update_cache)
  int64_t batch_offset = 0;              // update-cache with update_idx
  std::optional<int64_t> batch_idx;      // fill-cache
};

// Throws InputError before any file is read when the input count is wrong.
void check_decode_op_inputs(DecodeOp op, int inputs);

// Runs the op; InputError (one line) for shapes, positions, dtypes or
// options the op does not take.
OpResult run_decode_op(const DecodeOpRequest& request);

}  // namespace mha::ttsim
