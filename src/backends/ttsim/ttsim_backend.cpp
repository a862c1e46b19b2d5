#include "backends/ttsim/ttsim_backend.h"

#include "util/error.h"

namespace mha {

std::unique_ptr<Backend> make_ttsim_backend(const nlohmann::ordered_json&, const std::string& json_path) {
  throw InputError(json_path + ".name: backend 'tt-sim' is not available yet");
}

}  // namespace mha
