#pragma once
// A backend executes the canonical AttentionSpec (model/attention.h).
//
// A backend keeps a plan cache: the first run for a given spec and input
// shapes builds a plan (packed weights, workspaces, tt-sim programs); later
// runs reuse it. A plan is keyed by the spec's uid plus every shape, so a
// changed spec must be a new object (AttentionSpec::uid).
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/decode.h"
#include "backends/partial.h"
#include "model/attention.h"

namespace mha {

// What a backend promises about its numbers, so that a comparison derives
// its error bound from the backend's arithmetic, never from its name.
struct Precision {
  // The unit roundoff of the arithmetic its results are accumulated in:
  // 2^-53 (float64), 2^-24 (float32), 2^-8 (a device's bfloat16).
  double unit_roundoff = 0x1p-24;
  // true: inputs and intermediates are rounded to a device's formats
  // (bfloat16, block floats) at every step, so elements can differ by many
  // roundoffs and only statistical agreement (PCC) is promised; false:
  // every element agrees within a small multiple of unit_roundoff.
  bool statistical = false;
};

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Why this backend cannot run the spec on these inputs (one line naming
  // what it lacks), or nullopt when it can. run() throws InputError with
  // this reason; `mha bench` reports the row as skipped with it; the
  // cross-backend tests skip with it. Inputs are assumed to pass
  // validate_inputs.
  virtual std::optional<std::string> supports(const AttentionSpec& spec, const AttentionInputs& in) const {
    (void)spec, (void)in;
    return std::nullopt;
  }
  virtual AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) = 0;
  virtual CacheStats cache_stats() const { return {}; }
  // Threads this backend computes on (its "threads" option where it has one).
  virtual int threads() const { return 1; }
  // Backend-specific facts for reports (tt-sim: device, dtype, fidelity...).
  virtual nlohmann::json describe() const { return nlohmann::json::object(); }
  // True when the backend computes in float64 and so should be given float64
  // weights and inputs as the files hold them; every other backend is given
  // them as float32 (run/runner.cpp narrows them).
  virtual bool computes_in_float64() const { return false; }
  // Default: float32 or float64 elementwise, by computes_in_float64().
  virtual Precision precision() const { return {computes_in_float64() ? 0x1p-53 : 0x1p-24, false}; }
  // spec.out applied to `context` [B, L, E] (as run() returns it for the
  // spec without its output projection) with the arithmetic run() uses for
  // the spec's own output projection, so that a context gathered from
  // several ranks (src/parallel/) projects to one process's bits. The whole
  // spec, since the arithmetic may depend on more than the weights (tt-sim's
  // recipe). nullopt: this backend has no such path, and head-parallel runs
  // refuse it. Asked through supports(Capability::OutputProjection, spec).
  virtual std::optional<Tensor> project_output(const AttentionSpec& spec, const Tensor& context) {
    (void)spec, (void)context;
    return std::nullopt;
  }

  // Why this backend cannot do `c` for the spec ("no partial attention"),
  // or nullopt when it can: callers ask here instead of trying a call.
  std::optional<std::string> supports(Capability c, const AttentionSpec& spec) const { return capability_gap(c, spec); }
  // The dtype of partial attention's tensors and buffers: float64 when the
  // backend computes in it, else float32.
  DType arithmetic_dtype() const { return computes_in_float64() ? DType::F64 : DType::F32; }

  // Partial attention (backends/partial.h), for backends that support
  // Capability::PartialAttention; the defaults throw std::logic_error.
  // y [rows, out] = x [rows, in] W^T + b, x and y contiguous in
  // arithmetic_dtype(), p's tensors already in it.
  virtual void project_rows(const Projection& p, const void* x, int64_t rows, void* y);
  // Queries `qb` of q [B, n, H*dh] attend the keys of `kv`, masked by the
  // spec's causal / window rule on their token positions; `state` (over the
  // same n rows) carries the online softmax across calls. Keys a query
  // cannot see change nothing, so a block no query sees may be skipped.
  virtual void attend_partial(const AttentionSpec& spec, const Tensor& q, const QueryBlock& qb, const KeyBlock& kv,
                              SoftmaxState& state);
  // Merges two states of the same queries (backends/partial.h).
  virtual void merge_partial(SoftmaxState& into, const SoftmaxState& other) { merge_states(into, other); }

  // KV-cache decode (backends/decode.h). Why this backend cannot decode the
  // spec (one line), or nullopt when it can; the spec must be causal
  // self-attention. start_decode throws InputError with that reason.
  virtual std::optional<std::string> supports_decode(const AttentionSpec& spec) const {
    (void)spec;
    return "backend " + name() + " has no KV-cache decode";
  }
  virtual std::unique_ptr<DecodeSession> start_decode(const AttentionSpec& spec, const DecodeOptions& opt);

 protected:
  // supports(Capability)'s answer; a backend names what it implements.
  // Default: nothing.
  virtual std::optional<std::string> capability_gap(Capability c, const AttentionSpec& spec) const {
    (void)spec;
    return std::string("no ") + capability_name(c);
  }
};

// Throws InputError("backend NAME cannot run variant V: REASON") when
// backend.supports() gives a reason.
void require_supported(const Backend& backend, const AttentionSpec& spec, const AttentionInputs& in);

// The backend registered as `name` (backends/registry.h) with `options`, the
// config's "backend" object (without "name"); `json_path` locates it for
// error messages. InputError naming the known backends for an unknown name.
std::unique_ptr<Backend> make_backend(const std::string& name, const nlohmann::ordered_json& options,
                                      const std::string& json_path);

}  // namespace mha
