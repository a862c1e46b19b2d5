#pragma once
// `mha run` as a library: a config becomes a variant, weights, inputs and a
// canonical AttentionSpec; a backend runs it once cold (building its plan)
// and `iterations` times cached; the result is compared with the configured
// reference. The CLI only prints what this returns.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "compare/compare.h"
#include "config/config.h"
#include "run/decode_error.h"
#include "run/timing.h"
#include "variants/variant.h"

namespace mha {

// Whether PreparedRun::inputs holds the run's inputs yet.
enum class InputState {
  Ready,    // prepare_inputs (or a ring's input preparation) filled them, or the caller built them (bench rows)
  Pending,  // prepare_model read the model only: the run driver prepares them for the run's mode
};

struct PreparedRun {
  RunConfig config;
  std::unique_ptr<Variant> variant;
  ForwardOptions options;
  TensorMap weights;
  AttentionSpec spec;
  AttentionInputs inputs;
  InputState input_state = InputState::Ready;
};

// Resolves weights (init, file or folder) and inputs (files or rand/randn
// from one generator seeded by inputs.seed, in config order).
PreparedRun prepare_run(const RunConfig& config);
// prepare_run in two steps: the variant, options, weights and spec (inputs
// Pending); then the inputs (a ring run reads them by rows instead when it
// can: parallel/ring_io.h, prepare_ring_input).
PreparedRun prepare_model(const RunConfig& config);
// `given` (the Python package's mha.run(config, inputs=...)) holds tensors
// by input name that replace the config's entry of that name, or add one;
// the config's rand/randn inputs still draw in config order, so the others
// keep their values.
void prepare_inputs(PreparedRun& run, const TensorMap& given = {});

// Loads every weight of `v` from a .safetensors / .npz file, a Hugging Face
// checkpoint index or a folder of NAME.npy files (optionally the tensors under
// weights.prefix: run/checkpoint_weights.h) and binds them to its state_dict slots.
TensorMap load_weights(const Variant& v, const WeightsConfig& w);

// A "decode" run (config.decode): every iteration is a fresh session that
// prefills the prompt and then steps one token at a time. Step figures
// pool every step of the cached iterations.
struct DecodeTiming {
  int64_t prompt = 0, tokens = 0, depth = 0;
  std::string cache_format = "float32";  // the session's cache_format(), else decode.cache_dtype
  double prefill_ms = 0;  // median over cached iterations (the first's when there are none)
  std::vector<double> step_ms;
  double step_median_ms = 0, step_min_ms = 0, step_max_ms = 0;
  double tokens_per_s() const { return step_median_ms > 0 ? 1000.0 / step_median_ms : 0; }
  int64_t cache_bytes = 0;  // K and V held after the last step
  // The output of the last run against the float64 reference's decode of
  // the same tokens (run/decode_error.h); none on the reference backend
  // with a float32 cache, which is that run.
  std::optional<DecodeError> error;
  std::string error_skipped;  // why the error was not computed (decode_error_too_costly), else empty
};

struct RunRequest {
  bool need_weights = false;   // on top of the variant's need_weights option
  bool collect_stages = false;
  std::optional<int64_t> warmup, iterations;  // override the config's runs
  // A ring run may write the output .npy here (a temporary the caller
  // renames into place) row by row as ranks finish, instead of returning it
  // whole; RunReport::output_written says whether it did.
  std::string output_file;
};

// The rows of an output that was not held whole (RunReport::output_rows):
// its shape and dtype, and the rows of dim 1 a printed summary shows.
struct OutputRows {
  Shape shape;
  DType dtype = DType::F32;
  Tensor rows;                  // [B, index.size(), ...]
  std::vector<int64_t> index;   // which rows of dim 1, increasing
};

struct RunReport {
  AttentionResult result;  // in the module's conventions (finish() applied)
  Timing timing;
  CacheStats cache;
  nlohmann::json backend_info;
  std::string backend_name;
  std::optional<compare::Report> comparison;
  std::optional<DecodeTiming> decode;  // set for a decode run
  // Set when the output was too large to hold on one rank: result.output is
  // then empty and these are the rows a summary prints.
  std::optional<OutputRows> output_rows;
  bool output_written = false;  // RunRequest::output_file holds the output
};

RunReport execute_run(PreparedRun& run, Backend& backend, const RunRequest& request);

// The spec and inputs as a backend that does not compute in float64 is given
// them (float64 weights and inputs narrowed to float32), or nullopt when
// `backend` takes them as loaded.
std::optional<std::pair<AttentionSpec, AttentionInputs>> backend_view(const PreparedRun& run, const Backend& backend);

// The comparison the config's "reference" asks for, if any.
std::optional<compare::Report> compare_with_reference(const RunConfig& config, const Tensor& output);

nlohmann::json decode_json(const DecodeTiming& d);

}  // namespace mha
