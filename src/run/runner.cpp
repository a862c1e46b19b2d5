#include "run/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "init/torch_generator.h"
#include "io/tensor_file.h"
#include "run/checkpoint_weights.h"
#include "util/error.h"

namespace mha {

namespace fs = std::filesystem;

TensorMap load_weights(const Variant& v, const WeightsConfig& w) {
  switch (w.kind) {
    case WeightsConfig::Kind::TorchInit: return bind_weights(v, v.init_torch(w.seed), "weights (init torch)");
    case WeightsConfig::Kind::RandInit: return bind_weights(v, v.init_rand(w.seed), "weights (init rand)");
    case WeightsConfig::Kind::File:
    case WeightsConfig::Kind::Dir: {
      if (w.kind == WeightsConfig::Kind::Dir && !fs::is_directory(w.path))
        throw InputError(w.path + ": weights.dir is not a folder");
      return load_checkpoint_weights(v, w.path, w.prefix);
    }
  }
  throw std::logic_error("unknown weights kind");
}

PreparedRun prepare_run(const RunConfig& config) {
  PreparedRun r;
  r.config = config;
  r.variant = make_variant(config.variant, config.params);
  r.options = r.variant->parse_options(config.options);
  r.weights = load_weights(*r.variant, config.weights);
  r.spec = r.variant->build_spec(r.weights, r.options);

  TensorMap inputs;
  TorchGenerator gen(config.inputs_seed);
  for (const InputConfig& ic : config.inputs) {
    switch (ic.kind) {
      case InputConfig::Kind::File: inputs[ic.name] = io::read_tensor(ic.path); break;
      case InputConfig::Kind::Rand: inputs[ic.name] = gen.rand(ic.shape); break;
      case InputConfig::Kind::Randn: inputs[ic.name] = gen.randn(ic.shape); break;
    }
  }
  r.inputs = r.variant->build_inputs(inputs, r.options);
  r.inputs.dropout_seed = config.inputs_seed;
  validate_inputs(r.spec, r.inputs);
  spdlog::debug("{}: variant {} -> {} heads of {} (value {}), causal {}, out_dim {}", config.file, config.variant,
                r.spec.num_heads, r.spec.head_dim, r.spec.head_dim_v, r.spec.causal, r.spec.out_dim());
  return r;
}

void summarize_timing(Timing& t) {
  std::vector<double> v = t.cached_ms;
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  t.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  t.min_ms = v.front();
  t.max_ms = v.back();
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  t.mean_ms = sum / n;
  for (double x : v) sq += (x - t.mean_ms) * (x - t.mean_ms);
  t.stddev_ms = n > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
}

nlohmann::json timing_json(const Timing& t) {
  return {{"first_ms", t.first_ms},     {"cached_ms", t.cached_ms}, {"median_ms", t.median_ms},
          {"min_ms", t.min_ms},         {"max_ms", t.max_ms},       {"mean_ms", t.mean_ms},
          {"stddev_ms", t.stddev_ms},   {"flops", t.flops},         {"gflops_cached", t.gflops_cached()},
          {"gflops_first", t.gflops_first()}};
}

namespace {

Tensor narrow(const Tensor& t) { return t.dtype() == DType::F64 ? t.cast(DType::F32) : t; }
void narrow(Projection& p) {
  p.weight = narrow(p.weight);
  if (p.bias) p.bias = narrow(*p.bias);
  if (p.weight_in_out) p.weight_in_out = narrow(*p.weight_in_out);
}

// float64 weights and inputs (from float64 files) as float32, for a backend
// that computes in float32: what it was always given. A fresh uid, as the
// narrowed spec is a different spec for plan caches.
std::pair<AttentionSpec, AttentionInputs> narrowed_to_f32(const AttentionSpec& spec, const AttentionInputs& in) {
  std::pair<AttentionSpec, AttentionInputs> r{spec, in};
  AttentionSpec& s = r.first;
  s.uid = new_spec_uid();
  for (Projection* p : {&s.q, &s.k, &s.v}) narrow(*p);
  if (s.out) narrow(*s.out);
  if (s.qkv_fused) narrow(*s.qkv_fused);
  if (s.bias_k) s.bias_k = narrow(*s.bias_k);
  if (s.bias_v) s.bias_v = narrow(*s.bias_v);
  AttentionInputs& i = r.second;
  for (Tensor* t : {&i.query, &i.key, &i.value}) *t = narrow(*t);
  if (i.mask) i.mask = narrow(*i.mask);
  return r;
}

bool holds_f64(const AttentionSpec& s, const AttentionInputs& in) {
  bool f64 = false;
  for (const Projection* p : {&s.q, &s.k, &s.v, s.out ? &*s.out : nullptr})
    if (p) f64 = f64 || p->weight.dtype() == DType::F64 || (p->bias && p->bias->dtype() == DType::F64);
  for (const std::optional<Tensor>* b : {&s.bias_k, &s.bias_v}) f64 = f64 || (*b && (*b)->dtype() == DType::F64);
  for (const Tensor* t : {&in.query, &in.key, &in.value}) f64 = f64 || t->dtype() == DType::F64;
  return f64;
}

}  // namespace

std::optional<std::pair<AttentionSpec, AttentionInputs>> backend_view(const PreparedRun& run, const Backend& backend) {
  if (!backend.computes_in_float64() && holds_f64(run.spec, run.inputs)) return narrowed_to_f32(run.spec, run.inputs);
  return std::nullopt;
}

std::optional<compare::Report> compare_with_reference(const RunConfig& config, const Tensor& output) {
  if (!config.reference) return std::nullopt;
  const ReferenceConfig& rc = *config.reference;
  Tensor ref = io::read_tensor(rc.file);
  compare::Options co;
  co.atol = rc.atol;
  co.rtol = rc.rtol;
  co.pcc = rc.pcc;
  co.ref_name = rc.file;
  co.out_name = "output";
  return compare::compare(ref, output, co);
}

RunReport execute_run(PreparedRun& prepared, Backend& backend, const RunRequest& request) {
  // A float32 backend runs a float32 copy; the reference runs what was loaded.
  std::optional<std::pair<AttentionSpec, AttentionInputs>> f32 = backend_view(prepared, backend);
  struct View {
    const PreparedRun& p;
    const AttentionSpec& spec;
    const AttentionInputs& inputs;
  } run{prepared, f32 ? f32->first : prepared.spec, f32 ? f32->second : prepared.inputs};
  RunOptions opt;
  opt.need_weights = request.need_weights || run.p.options.need_weights;
  const int64_t warmup = request.warmup.value_or(run.p.config.warmup);
  const int64_t iterations = request.iterations.value_or(run.p.config.iterations);
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };

  // Before any timing: a spec the backend cannot run is one clear line.
  require_supported(backend, run.spec, run.inputs);
  RunReport rep;
  rep.backend_name = backend.name();
  rep.timing.flops = attention_flops(run.spec, run.inputs);
  // The first run builds the plan; stages, when asked for, come from an
  // extra run so that they never distort the timings.
  auto t0 = clock::now();
  AttentionResult result = backend.run(run.spec, run.inputs, opt);
  rep.timing.first_ms = ms_since(t0);
  spdlog::debug("{}: first run {:.3f} ms (plan built)", backend.name(), rep.timing.first_ms);
  for (int64_t i = 0; i < warmup; ++i) backend.run(run.spec, run.inputs, opt);
  for (int64_t i = 0; i < iterations; ++i) {
    t0 = clock::now();
    result = backend.run(run.spec, run.inputs, opt);
    rep.timing.cached_ms.push_back(ms_since(t0));
  }
  summarize_timing(rep.timing);
  if (request.collect_stages) {
    RunOptions so = opt;
    so.collect_stages = true;
    result.stages = backend.run(run.spec, run.inputs, so).stages;
  }
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  rep.result = run.p.variant->finish(std::move(result), run.p.options);

  rep.comparison = compare_with_reference(run.p.config, rep.result.output);
  return rep;
}

}  // namespace mha
