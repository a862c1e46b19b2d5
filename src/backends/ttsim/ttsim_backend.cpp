#include "backends/ttsim/ttsim_backend.h"

#include <algorithm>
#include <map>
#include <thread>
#include <tuple>

#include "backends/ttsim/ttsim_pipeline.h"
#include "util/error.h"

namespace mha {

namespace {

using namespace ttsim;

// One device per backend object, as one ttnn.open_device per process. Plans
// (recipe + host-converted weights) are keyed by the spec's uid; programs by
// the device's program cache.
class TtSimBackend : public Backend {
 public:
  explicit TtSimBackend(TtOptions o) : dev_(o), opt_(std::move(o)) {}
  std::string name() const override { return "tt-sim"; }

  std::optional<std::string> supports(const AttentionSpec& spec, const AttentionInputs& in) const override {
    return tt_supports(spec, in);
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) override {
    validate_inputs(spec, in);
    require_supported(*this, spec, in);
    auto it = plans_.find(spec.uid);
    if (it == plans_.end()) {
      Plan p;
      p.recipe = make_recipe(spec.ops, opt_);
      p.weights = convert_weights(spec, p.recipe);
      it = plans_.emplace(spec.uid, std::move(p)).first;
    }
    last_ = it->second.recipe;
    return run_pipeline(dev_, it->second.recipe, it->second.weights, spec, in, opt);
  }

  CacheStats cache_stats() const override { return dev_.stats(); }

  int threads() const override {
    return opt_.threads > 0 ? opt_.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  nlohmann::json describe() const override {
    nlohmann::json j = {{"device", opt_.device.name},
                        {"grid", {opt_.device.grid_y, opt_.device.grid_x}},
                        {"l1_bytes_per_core", opt_.device.l1_bytes},
                        {"dram_bytes", opt_.device.dram_bytes},
                        // Host execution: the lane kernels chosen at run time and the pool size.
                        {"simd", simd::isa_name(opt_.isa)},
                        {"threads", threads()}};
    if (last_) j.update(recipe_json(*last_));
    j["program_cache"] = dev_.per_op_json();
    return j;
  }

 private:
  struct Plan {
    Recipe recipe;
    DeviceWeights weights;
  };
  TtDevice dev_;
  TtOptions opt_;
  std::map<uint64_t, Plan> plans_;
  std::optional<Recipe> last_;
};

}  // namespace

std::unique_ptr<Backend> make_ttsim_backend(const nlohmann::ordered_json& options, const std::string& json_path) {
  return std::make_unique<TtSimBackend>(parse_tt_options(options, json_path));
}

}  // namespace mha
