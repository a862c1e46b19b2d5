#include "run/runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "init/torch_generator.h"
#include "io/tensor_file.h"
#include "model/spec_fields.h"
#include "run/checkpoint_weights.h"
#include "run/passes.h"
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

namespace {

bool same_data(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.raw() == b.raw() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

// What a KV cache can serve, checked on the canonical inputs (no variant
// names): one self-attention input of prompt + tokens rows, no mask, no
// explicit positions, no attention weights, inference.
void check_decode_inputs(const DecodeConfig& d, const AttentionSpec& spec, const AttentionInputs& in,
                         const ForwardOptions& opt) {
  (void)spec;
  if (!same_data(in.query, in.key) || !same_data(in.query, in.value))
    throw InputError("decode: needs self-attention, query, key and value must be the same tensor");
  if (in.query.dim(1) != d.prompt + d.tokens)
    throw InputError("decode: the input has " + std::to_string(in.query.dim(1)) + " tokens, expected prompt + tokens = " +
                     std::to_string(d.prompt) + " + " + std::to_string(d.tokens) + " = " +
                     std::to_string(d.prompt + d.tokens));
  if (in.mask) throw InputError("decode: an explicit mask (attn_mask / key_padding_mask / attention_mask) is not supported");
  if (in.positions) throw InputError("decode: explicit position_ids are not supported (the cache uses 0 .. prompt+tokens-1)");
  if (opt.need_weights) throw InputError("decode: returns no attention weights, set options.need_weights to false");
  if (opt.training) throw InputError("decode: runs inference only, set options.training to false");
}

// Rows [r0, r0 + n) of x [B, L, E] as a [B, n, E] tensor.
Tensor rows_of(const Tensor& x, int64_t r0, int64_t n) {
  const int64_t B = x.dim(0), L = x.dim(1), E = x.dim(2), es = static_cast<int64_t>(dtype_size(x.dtype()));
  Tensor t(x.dtype(), {B, n, E});
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(t.raw() + b * n * E * es, x.raw() + (b * L + r0) * E * es,
                n * E * es);
  return t;
}

}  // namespace

PreparedRun prepare_run(const RunConfig& config) {
  PreparedRun r = prepare_model(config);
  prepare_inputs(r);
  return r;
}

PreparedRun prepare_model(const RunConfig& config) {
  PreparedRun r;
  r.config = config;
  r.variant = make_variant(config.variant, config.params);
  r.options = r.variant->parse_options(config.options);
  r.weights = load_weights(*r.variant, config.weights);
  r.spec = r.variant->build_spec(r.weights, r.options);
  r.input_state = InputState::Pending;
  return r;
}

void prepare_inputs(PreparedRun& r, const TensorMap& given) {
  const RunConfig& config = r.config;
  TensorMap inputs;
  TorchGenerator gen(config.inputs_seed);
  for (const InputConfig& ic : config.inputs) {
    switch (ic.kind) {
      case InputConfig::Kind::File:
        if (!given.count(ic.name)) inputs[ic.name] = io::read_tensor(ic.path);
        break;
      case InputConfig::Kind::Rand: inputs[ic.name] = gen.rand(ic.shape); break;
      case InputConfig::Kind::Randn: inputs[ic.name] = gen.randn(ic.shape); break;
    }
  }
  for (const auto& [name, t] : given) inputs[name] = t;
  r.inputs = r.variant->build_inputs(inputs, r.options);
  r.inputs.dropout_seed = config.inputs_seed;
  validate_inputs(r.spec, r.inputs);
  if (config.decode) check_decode_inputs(*config.decode, r.spec, r.inputs, r.options);
  spdlog::debug("{}: variant {} -> {} heads of {} (value {}), causal {}, out_dim {}", config.file, config.variant,
                r.spec.num_heads, r.spec.head_dim, r.spec.head_dim_v, r.spec.causal, r.spec.out_dim());
  r.input_state = InputState::Ready;
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

// float64 weights and inputs (from float64 files) as float32, for a backend
// that computes in float32: what it was always given.
std::pair<AttentionSpec, AttentionInputs> narrowed_to_f32(const AttentionSpec& spec, const AttentionInputs& in) {
  std::pair<AttentionSpec, AttentionInputs> r{spec_as_f32(spec), in};
  AttentionInputs& i = r.second;
  for (Tensor* t : {&i.query, &i.key, &i.value}) *t = narrow(*t);
  if (i.mask) i.mask = narrow(*i.mask);
  return r;
}

bool holds_f64(const AttentionSpec& s, const AttentionInputs& in) {
  bool f64 = spec_holds_f64(s);
  for (const Tensor* t : {&in.query, &in.key, &in.value}) f64 = f64 || t->dtype() == DType::F64;
  return f64;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Prefill of d.prompt rows, then d.tokens single-row steps, on a fresh
// session per iteration: input x [B, P+T, E] -> output [B, P+T, out_dim]
// (the steps' rows after the prompt's). Timing.first_ms / cached_ms hold
// whole iterations; DecodeTiming splits the cached ones into phases.
RunReport execute_decode(const DecodeConfig& d, const AttentionSpec& spec, const AttentionInputs& in, Backend& backend,
                         const RunRequest& request, int64_t warmup, int64_t iterations) {
  if (request.need_weights) throw InputError("--attn-weights: a decode run returns no attention weights");
  if (request.collect_stages) throw InputError("--dump-stages / --compare-stages: a decode run has no stages");
  if (auto why = backend.supports_decode(spec))
    throw InputError("backend " + backend.name() + " cannot decode variant " + spec.variant + ": " + *why);
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  const Tensor& x = in.query;
  const int64_t B = x.dim(0), P = d.prompt, T = d.tokens, O = spec.out_dim();
  DecodeOptions opt;
  opt.cache_dtype = d.cache_dtype, opt.batch = B, opt.max_tokens = d.depth + P + T;
  const Tensor prompt = rows_of(x, 0, P);
  std::vector<Tensor> steps;
  for (int64_t i = 0; i < T; ++i) steps.push_back(rows_of(x, P + i, 1));

  RunReport rep;
  rep.backend_name = backend.name();
  rep.timing.flops = attention_flops(spec, in);
  DecodeTiming dt;
  dt.prompt = P, dt.tokens = T, dt.depth = d.depth;
  std::vector<double> prefills;
  auto once = [&](bool record) -> Tensor {
    std::unique_ptr<DecodeSession> session = backend.start_decode(spec, opt);
    if (d.depth > 0) session->fill_synthetic(d.depth, in.dropout_seed);  // untimed: not part of the prefill
    const auto tp = clock::now();
    Tensor first = session->append(prompt);
    if (record) prefills.push_back(ms_since(tp));
    Tensor out(first.dtype(), {B, P + T, O});
    const int64_t es = static_cast<int64_t>(dtype_size(out.dtype()));
    auto place = [&](const Tensor& y, int64_t r0, int64_t n) {
      for (int64_t b = 0; b < B; ++b)
        std::memcpy(out.raw() + (b * (P + T) + r0) * O * es, y.raw() + b * n * O * es, n * O * es);
    };
    place(first, 0, P);
    for (int64_t i = 0; i < T; ++i) {
      const auto ts = clock::now();
      Tensor y = session->append(steps[i]);
      if (record) dt.step_ms.push_back(ms_since(ts));
      place(y, P + i, 1);
    }
    dt.cache_bytes = session->cache_bytes();
    dt.cache_format = session->cache_format().empty() ? cache_dtype_name(d.cache_dtype) : session->cache_format();
    return out;
  };
  // iterations 0 (runs of minutes): the first run's phases are the ones reported.
  Tensor output;
  time_passes(rep.timing, warmup, iterations, [&](const Pass& p) {
    Tensor y = once(p.timed || (iterations == 0 && p.first));
    if (p.first || p.timed) output = std::move(y);
  });
  dt.prefill_ms = median_of(prefills);
  if (!dt.step_ms.empty()) {
    dt.step_median_ms = median_of(dt.step_ms);
    dt.step_min_ms = *std::min_element(dt.step_ms.begin(), dt.step_ms.end());
    dt.step_max_ms = *std::max_element(dt.step_ms.begin(), dt.step_ms.end());
  }
  if (backend.name() != "reference" || d.cache_dtype != CacheDtype::Float32) {
    if (auto why = decode_error_too_costly(spec, B, d.depth, P + T)) {
      dt.error_skipped = *why;
    } else {
      std::vector<Tensor> appends{prompt};
      appends.insert(appends.end(), steps.begin(), steps.end());
      dt.error = decode_error_vs_float64(spec, B, d.depth, in.dropout_seed, appends, output);
    }
  }
  rep.decode = dt;
  rep.result.output = std::move(output);
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  return rep;
}

}  // namespace

nlohmann::json decode_json(const DecodeTiming& d) {
  return {{"prompt", d.prompt},
          {"tokens", d.tokens},
          {"depth", d.depth},
          {"cache_dtype", d.cache_format},
          {"prefill_ms", d.prefill_ms},
          {"step_median_ms", d.step_median_ms},
          {"step_min_ms", d.step_min_ms},
          {"step_max_ms", d.step_max_ms},
          {"tokens_per_s", d.tokens_per_s()},
          {"cache_bytes", d.cache_bytes},
          {"cache_error", d.error ? nlohmann::json{{"max_abs", d.error->max_abs}, {"rel_l2", d.error->rel_l2}}
                          : d.error_skipped.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json{{"skipped", d.error_skipped}}}};
}

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

  if (run.p.config.decode) {
    RunReport rep = execute_decode(*run.p.config.decode, run.spec, run.inputs, backend, request, warmup, iterations);
    rep.result = run.p.variant->finish(std::move(rep.result), run.p.options, run.inputs);
    rep.comparison = compare_with_reference(run.p.config, rep.result.output);
    return rep;
  }
  // Before any timing: a spec the backend cannot run is one clear line.
  require_supported(backend, run.spec, run.inputs);
  RunReport rep;
  rep.backend_name = backend.name();
  rep.timing.flops = attention_flops(run.spec, run.inputs);
  // The first run builds the plan; stages, when asked for, come from an
  // extra run so that they never distort the timings. Each run's result
  // replaces the one before, which is freed first, untimed: two outputs
  // never live at once (a 131072x1024 float32 output is 512 MiB).
  AttentionResult result;
  time_passes(
      rep.timing, warmup, iterations, [&](const Pass&) { result = backend.run(run.spec, run.inputs, opt); },
      [&](const Pass&) { result = AttentionResult(); });
  spdlog::debug("{}: first run {:.3f} ms (plan built)", backend.name(), rep.timing.first_ms);
  if (request.collect_stages) {
    RunOptions so = opt;
    so.collect_stages = true;
    result.stages = backend.run(run.spec, run.inputs, so).stages;
  }
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  rep.result = run.p.variant->finish(std::move(result), run.p.options, run.inputs);
  rep.comparison = compare_with_reference(run.p.config, rep.result.output);
  return rep;
}

}  // namespace mha
