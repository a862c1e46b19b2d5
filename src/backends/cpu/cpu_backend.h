#pragma once
#include "backends/backend.h"

namespace mha {

// float32, fast: packed-weight GEMM projections, blockwise attention with an
// online softmax, all cores. `options` is the config's backend object.
std::unique_ptr<Backend> make_cpu_backend(const nlohmann::ordered_json& options, const std::string& json_path);

}  // namespace mha
