#pragma once
// The run configuration (docs/CONFIG.md lists every key), parsed and checked. Every unknown
// key, wrong type or impossible value is an InputError that names the config
// file and the JSON path. Paths are resolved against the config's folder.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/json_util.h"
#include "model/cache_dtype.h"
#include "tensor/tensor.h"

namespace mha {

struct WeightsConfig {
  enum class Kind { TorchInit, RandInit, File, Dir } kind = Kind::TorchInit;
  uint64_t seed = 0;
  std::string path;  // resolved, for File / Dir
  // File / Dir: only tensors named PREFIX + weight name are bound, the rest ignored.
  std::optional<std::string> prefix;
};

struct InputConfig {
  enum class Kind { File, Rand, Randn } kind = Kind::File;
  std::string name;
  std::string path;  // resolved tensor spec for File ("a.npy", "b.npz:x")
  Shape shape;       // for Rand / Randn
};

struct ReferenceConfig {
  std::string file;  // resolved tensor spec
  std::optional<double> atol, rtol, pcc;
};

// "decode": prefill `prompt` tokens, then `tokens` single-token steps
// against a KV cache of `cache_dtype` (backends/decode.h).
// The most cached positions a synthetic context may hold: the config's
// decode.depth and `mha bench -d` share it.
constexpr int64_t kMaxDecodeDepth = int64_t{1} << 24;

struct DecodeConfig {
  int64_t prompt = 1;
  int64_t tokens = 0;
  CacheDtype cache_dtype = CacheDtype::Float32;
  // Timing only: a synthetic context of `depth` cached positions (random K
  // and V, DecodeSession::fill_synthetic) before the prompt, as
  // llama-bench's -d; the rows then sit at positions depth ...
  int64_t depth = 0;
};

// "parallel": {"heads": N}: the run split across N MPI ranks, each
// projecting and attending H / N heads (src/parallel/head_parallel.h);
// {"sequence": N}: ring attention, each rank a block of the tokens
// (src/parallel/ring.h).
struct ParallelConfig {
  enum class Mode { Heads, Sequence } mode = Mode::Heads;
  int64_t ranks = 1;
};

// "model": {"hf": DIR, "layer": N}: layer N's attention of a Hugging Face
// model folder (hf/hf_config.h), in place of variant, params and weights,
// which parse_config fills from it.
struct ModelConfig {
  std::string hf;  // resolved folder
  int64_t layer = 0;
};

struct RunConfig {
  std::string file;  // the config file, for messages
  std::string name;
  std::string variant;
  ordered_json params = ordered_json::object();
  WeightsConfig weights;
  std::vector<InputConfig> inputs;  // in the order the config lists them
  uint64_t inputs_seed = 0;
  ordered_json options = ordered_json::object();
  std::string backend = "cpu";
  ordered_json backend_options = ordered_json::object();  // the backend object without "name"
  int64_t warmup = 0;
  int64_t iterations = 10;
  std::optional<ReferenceConfig> reference;
  std::optional<DecodeConfig> decode;
  std::optional<ParallelConfig> parallel;
  std::optional<ModelConfig> model;
};

RunConfig load_config(const std::string& path);
// `dir` resolves relative paths; `file` prefixes messages.
RunConfig parse_config(const ordered_json& j, const std::string& dir, const std::string& file);

}  // namespace mha
