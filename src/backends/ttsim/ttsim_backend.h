#pragma once
#include "backends/backend.h"

namespace mha {

// Emulates what a Tenstorrent device computes when TT-NN runs the seed
// pipelines. `options` is the config's backend object (TT-NN vocabulary).
std::unique_ptr<Backend> make_ttsim_backend(const nlohmann::ordered_json& options, const std::string& json_path);

}  // namespace mha
