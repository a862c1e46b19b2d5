#include "backends/ttsim/ttsim_backend.h"

#include <algorithm>
#include <map>
#include <thread>
#include <tuple>

#include "backends/ttsim/ttsim_mla.h"
#include "backends/ttsim/ttsim_pipeline.h"
#include "backends/ttsim/ttsim_sdpa.h"
#include "backends/decode.h"
#include "util/error.h"

namespace mha {

namespace {

using namespace ttsim;

// One device per backend object, as one ttnn.open_device per process. Plans
// (recipe + host-converted weights) are keyed by the spec's uid; programs by
// the device's program cache.
// The spec features of today's models that tt-sim's pipelines do not
// emulate yet. Rope scalings need nothing: they change only the cos/sin
// table, which the SDPA pipeline uploads as is. QK-norm and sinks run on
// the SDPA pipeline as TT-NN's model code runs them (ttnn.rms_norm on the
// heads; SDPA's attention_sink), and only there (sdpa_only_gap).
std::optional<std::string> feature_gap(const AttentionSpec& spec) {
  const std::string run_elsewhere = "; run on cpu or reference";
  if (spec.softcap > 0.0)
    return "logit softcapping is not emulated on tt-sim (TT-NN's SDPA has no softcap)" + run_elsewhere;
  if (spec.rope && spec.rope->rotary_dim > 0 && spec.rope->rotary_dim != spec.head_dim)
    return "partial rotary (rotary_dim " + std::to_string(spec.rope->rotary_dim) + " of head_dim " +
           std::to_string(spec.head_dim) + ") is not emulated on tt-sim" + run_elsewhere;
  if (spec.rope && spec.rope->interleaved)
    return "interleaved rotary pairs are not emulated on tt-sim" + run_elsewhere;
  return std::nullopt;
}

// Features only the SDPA pipeline has (the op-by-op pipelines have no norm
// or sink step).
std::optional<std::string> sdpa_only_gap(const AttentionSpec& spec) {
  if (spec.qk_norm) return std::string("QK RMSNorm (qk_norm) runs only on attention \"sdpa\"");
  if (spec.sinks) return std::string("attention sinks run only on attention \"sdpa\" (SDPA's attention_sink)");
  return std::nullopt;
}

// Why attention "ops" cannot serve head-parallel runs.
constexpr const char* kOpsNotShared =
    "no separate output projection: TT-NN picks its projections' programs by their width, so a share of the heads "
    "may round otherwise; attention \"sdpa\" has one";

class TtSimBackend : public Backend {
 public:
  explicit TtSimBackend(TtOptions o) : dev_(o), opt_(std::move(o)) {}
  std::string name() const override { return "tt-sim"; }

  std::optional<std::string> supports(const AttentionSpec& spec, const AttentionInputs& in) const override {
    if (spec.mla) return mla_gap(spec, &in);
    if (auto why = feature_gap(spec)) return why;
    if (path(spec, &in) == AttentionKernel::Sdpa) {
      if (auto why = sdpa_unsupported(spec, &in)) return "attention \"sdpa\": " + *why;
      return std::nullopt;
    }
    if (auto why = sdpa_only_gap(spec)) {
      if (auto sdpa = sdpa_unsupported(spec, &in)) return *why + ", and " + *sdpa;
      return *why;
    }
    if (spec.rope) {
      if (opt_.attention) return std::string("attention \"ops\" has no rotary embedding op; use \"sdpa\"");
      if (auto why = sdpa_unsupported(spec, &in)) return "rotary embeddings run only as SDPA, and " + *why;
    }
    return tt_supports(spec, in);
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) override {
    validate_inputs(spec, in);
    require_supported(*this, spec, in);
    if (spec.mla) {
      if (opt.need_weights) throw InputError("tt-sim: flash_mla_prefill returns no attention weights");
      if (opt.group_projections) throw InputError("tt-sim: head-parallel MLA is not modelled (one process runs it)");
      const MlaPlan& p = mla_plan(spec);
      return run_mla_prefill(dev_, p.recipe, p.weights, spec, in, opt);
    }
    const AttentionKernel kernel = path(spec, &in, opt.need_weights);
    // A head-parallel share (RunOptions::group_projections) is projected by
    // project_output, which is the SDPA pipeline's: the inputs (a mask,
    // cross-attention) must not send the share down the op sequence.
    if (opt.group_projections && kernel != AttentionKernel::Sdpa)
      throw InputError(std::string("tt-sim: head-parallel: these inputs run attention \"ops\", which has ") + kOpsNotShared);
    if (kernel == AttentionKernel::Sdpa) {
      if (opt.need_weights)
        throw InputError("tt-sim: attention \"sdpa\" returns no attention weights (set attention to \"ops\")");
      const SdpaPlan& p = sdpa_plan(spec);
      return run_sdpa_prefill(dev_, p.recipe, p.weights, spec, in, opt);
    }
    auto it = plans_.find(spec.uid);
    if (it == plans_.end()) {
      Plan p;
      p.recipe = make_recipe(spec.ops, opt_);
      p.weights = convert_weights(spec, p.recipe);
      it = plans_.emplace(spec.uid, std::move(p)).first;
    }
    last_ = recipe_json(it->second.recipe);
    return run_pipeline(dev_, it->second.recipe, it->second.weights, spec, in, opt);
  }

  // Every step rounds to the device's formats (bfloat16 at best).
  Precision precision() const override { return {0x1p-8, true}; }

  // Decode runs the SDPA pipeline (prefill into the device's KV cache, then
  // SDPA decode per token).
  std::optional<std::string> supports_decode(const AttentionSpec& spec) const override {
    if (spec.mla) return mla_gap(spec, nullptr);
    if (auto why = feature_gap(spec)) return why;
    if (opt_.attention == AttentionKernel::Ops)
      return std::string("attention \"ops\" has no KV cache; tt-sim decodes with attention \"sdpa\"");
    if (auto why = decode_unsupported(spec)) return why;
    if (auto why = sdpa_unsupported(spec, nullptr)) return "attention \"sdpa\": " + *why;
    return std::nullopt;
  }
  std::unique_ptr<DecodeSession> start_decode(const AttentionSpec& spec, const DecodeOptions& opt) override {
    if (supports_decode(spec)) return Backend::start_decode(spec, opt);  // throws the reason
    if (spec.mla) {
      const MlaPlan& p = mla_plan(spec);
      return make_mla_decode(dev_, p.recipe, p.weights, spec, opt);
    }
    const SdpaPlan& p = sdpa_plan(spec);
    return make_sdpa_decode(dev_, p.recipe, p.weights, spec, opt);
  }

  // The SDPA pipeline's projection of a gathered context (ttsim_sdpa.h).
  std::optional<Tensor> project_output(const AttentionSpec& spec, const Tensor& context) override {
    if (capability_gap(Capability::OutputProjection, spec)) return std::nullopt;
    const SdpaPlan& p = sdpa_plan(spec);
    const Tensor x = context.dtype() == DType::F32 ? context : context.cast(DType::F32);
    return sdpa_project_output(dev_, p.recipe, p.weights, spec, x);
  }

  CacheStats cache_stats() const override { return dev_.stats(); }

  int threads() const override {
    return opt_.host.threads > 0 ? opt_.host.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  nlohmann::json describe() const override {
    nlohmann::json j = {{"device", opt_.device.name},
                        {"arch", arch_name(opt_.device.arch)},
                        {"tt_metal", tt_metal_json(opt_.tt_metal)},
                        {"grid", {opt_.device.grid_y, opt_.device.grid_x}},
                        {"l1_bytes_per_core", opt_.device.l1_bytes},
                        {"dram_bytes", opt_.device.dram_bytes},
                        // Host execution: the lane kernels chosen at run time and the pool size.
                        {"simd", simd::isa_name(opt_.isa)},
                        {"threads", threads()}};
    if (last_) j.update(*last_);
    j["program_cache"] = dev_.per_op_json();
    if (!dev_.notes().empty()) j["notes"] = dev_.notes();
    return j;
  }

 protected:
  // Attention weights come from the op sequence only: SDPA (the option's
  // choice, and the only path a rotary spec has) never forms them.
  std::optional<std::string> capability_gap(Capability c, const AttentionSpec& spec) const override {
    if (c == Capability::AttentionWeights) {
      if (opt_.attention == AttentionKernel::Sdpa || spec.rope)
        return std::string("attention \"sdpa\" returns no attention weights");
      return std::nullopt;
    }
    if (c == Capability::OutputProjection) {
      if (path(spec, nullptr) != AttentionKernel::Sdpa) return std::string("attention \"ops\" has ") + kOpsNotShared;
      return std::nullopt;
    }
    return std::string("no ") + capability_name(c);
  }

 private:
  // The option when given, else the spec's default where SDPA can run it
  // on these inputs (`in` null: a decode session), else the op sequence.
  // A run that asks for attention weights (torch_mha's default) takes the
  // op sequence when it can (a rotary spec cannot).
  AttentionKernel path(const AttentionSpec& spec, const AttentionInputs* in, bool need_weights = false) const {
    if (opt_.attention) return *opt_.attention;
    if (spec.attention == AttentionKernel::Sdpa && !sdpa_unsupported(spec, in) && !(need_weights && !spec.rope))
      return AttentionKernel::Sdpa;
    return AttentionKernel::Ops;
  }

  struct Plan {
    Recipe recipe;
    DeviceWeights weights;
  };
  struct SdpaPlan {
    SdpaRecipe recipe;
    SdpaWeights weights;
  };
  struct MlaPlan {
    SdpaRecipe recipe;
    MlaWeights weights;
  };

  // MLA runs only as flash_mla_prefill (ttsim_mla.h).
  std::optional<std::string> mla_gap(const AttentionSpec& spec, const AttentionInputs* in) const {
    if (opt_.attention == AttentionKernel::Ops)
      return std::string("multi-head latent attention runs as flash_mla_prefill only; attention \"ops\" has no "
                         "latent path");
    return mla_unsupported(spec, in);
  }
  const MlaPlan& mla_plan(const AttentionSpec& spec) {
    auto it = mla_plans_.find(spec.uid);
    if (it == mla_plans_.end()) {
      MlaPlan p;
      p.recipe = make_sdpa_recipe(opt_);
      p.weights = convert_mla_weights(spec, p.recipe);
      it = mla_plans_.emplace(spec.uid, std::move(p)).first;
    }
    last_ = sdpa_recipe_json(it->second.recipe);
    (*last_)["pipeline"] = "mla";
    return it->second;
  }
  const SdpaPlan& sdpa_plan(const AttentionSpec& spec) {
    auto it = sdpa_plans_.find(spec.uid);
    if (it == sdpa_plans_.end()) {
      SdpaPlan p;
      p.recipe = make_sdpa_recipe(opt_);
      p.weights = convert_sdpa_weights(spec, p.recipe);
      it = sdpa_plans_.emplace(spec.uid, std::move(p)).first;
    }
    last_ = sdpa_recipe_json(it->second.recipe);
    if (spec.sinks)
      (*last_)["attention_sink"] =
          "as TT-NN's gpt-oss attention passes it to prefill and decode: sinks / scale, which SDPA scales back "
          "as it scales the scores (the sink logit transformers has)";
    return it->second;
  }

  TtDevice dev_;
  TtOptions opt_;
  std::map<uint64_t, Plan> plans_;
  std::map<uint64_t, SdpaPlan> sdpa_plans_;  // node-based: decode sessions keep references
  std::map<uint64_t, MlaPlan> mla_plans_;
  std::optional<nlohmann::json> last_;
};

}  // namespace

std::unique_ptr<Backend> make_ttsim_backend(const nlohmann::ordered_json& options, const std::string& json_path) {
  return std::make_unique<TtSimBackend>(parse_tt_options(options, json_path));
}

}  // namespace mha
