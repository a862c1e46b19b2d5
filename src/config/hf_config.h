#pragma once
// A run config's "model": {"hf": DIR, "layer": N} (hf/hf_model.h reads the folder) turned into what every
// other part of mha runs: variant llama_attention, the layer's params, its
// weights (the folder's checkpoint under the layer's prefix), and, when the
// config gives no inputs, x randn [1, seq, hidden] (seq: decode's prompt +
// tokens, else kDefaultHfSeq).
#include <string>

#include "config/config.h"
#include "hf/hf_model.h"

namespace mha {

constexpr int64_t kDefaultHfSeq = 16;

void resolve_hf_model(RunConfig& c);

// Layer `layer`'s weights: the folder's checkpoint under the layer's prefix.
WeightsConfig hf_layer_weights(const HfModel& m, int64_t layer);

// `mha inspect DIR`: the model's family, then one line per layer saying
// what its attention is; `json` for machines.
std::string format_hf_inspect(const std::string& dir, bool json);

// True when `path` is a folder holding config.json (what inspect shows as a model).
bool is_hf_folder(const std::string& path);

}  // namespace mha
