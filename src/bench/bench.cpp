#include "bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "util/build_info.h"
#include "bench/peak_memory.h"
#include "bench/phases.h"
#include "config/config.h"
#include "config/hf_config.h"
#include "init/torch_generator.h"
#include "util/checked_size.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::bench {

std::string Row::test() const {
  switch (phase) {
    case Phase::Prefill: return "pp" + std::to_string(seq);
    case Phase::Generate: return "tg" + std::to_string(seq);
    case Phase::Forward: break;
  }
  return "fwd";
}

std::string Row::label() const {
  std::string s = variant + " " + backend + " " + std::to_string(batch) + "x" + std::to_string(seq) + "x" +
                  std::to_string(hidden) + "/" + std::to_string(heads) +
                  (kv_heads > 0 ? ":" + std::to_string(kv_heads) : "") + (causal ? " causal" : "");
  if (!hf.empty()) s = hf + " layer " + std::to_string(hf_layer) + " " + backend + " " + std::to_string(batch) + "x" +
                       std::to_string(seq);
  if (phase != Phase::Forward) s = (hf.empty() ? variant : hf + " layer " + std::to_string(hf_layer)) + " " + backend + " " + test() + " @ d" + std::to_string(depth);
  if (threads > 0) s += " t" + std::to_string(threads);
  return s;
}

nlohmann::ordered_json Row::effective_backend_options() const {
  nlohmann::ordered_json o = backend_options;
  if (threads > 0) o["threads"] = threads;
  return o;
}

void parse_test(const std::string& test, Row& row, const std::string& where) {
  if (test == "fwd") {
    row.phase = Phase::Forward;
    return;
  }
  const std::string digits = test.size() > 2 ? test.substr(2) : "";
  const bool number = !digits.empty() && digits.size() <= 12 &&
                      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::string kind = test.substr(0, 2);
  if (!number || (kind != "pp" && kind != "tg") || std::stoll(digits) < 1)
    throw InputError(where + ": expected pp<P>, tg<N> (P, N >= 1) or fwd, found '" + printable(test) + "'");
  row.phase = kind == "pp" ? Phase::Prefill : Phase::Generate;
  row.seq = std::stoll(digits);
  row.causal = true;
}

std::vector<Row> default_suite() {
  auto row = [](const char* variant, int64_t b, int64_t s, int64_t h, int64_t heads, bool causal) {
    Row r;
    r.variant = variant;
    r.batch = b, r.seq = s, r.hidden = h, r.heads = heads, r.causal = causal;
    return r;
  };
  Row tt = row("ttnn_mha", 8, 384, 1024, 16, false);
  tt.backend = "tt-sim";
  tt.max_warmup = 0;
  tt.max_repetitions = 2;
  return {
      row("torch_mha", 8, 384, 1024, 16, false),  // seed 002's shape, PyTorch's module
      row("ttnn_mha", 8, 384, 1024, 16, false),   // seed 002's variant on the cpu backend
      tt,                                         // ... and on tt-sim, bit-exact
      row("torch_mha", 1, 1024, 768, 12, true),
      row("torch_mha", 1, 4096, 1024, 16, true),
      row("mha_causal", 2, 6, 2, 2, true),        // seed 000 / 003
      row("mha", 2, 5, 12, 3, false),             // seed 001
      row("torch_mha", 1, 8, 4, 2, true),         // seed 004
  };
}

std::vector<Row> load_suite(const std::string& path) { return parse_suite(read_json_file(path, "suite file"), path); }

std::vector<Row> parse_suite(const ordered_json& j, const std::string& path) {
  if (!j.is_array()) throw InputError(path + ": expected a JSON array of rows, found " + json_brief(j));
  std::vector<Row> rows;
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string p = path + ": [" + std::to_string(i) + "]";
    const ordered_json& o = require_object(j[i], p);
    check_keys(o, p, {"variant", "backend", "test", "batch", "seq", "hidden", "heads", "kv_heads", "depth", "causal",
                      "threads", "cache_dtype", "backend_options"});
    Row r;
    if (find(o, "variant")) r.variant = as_string(o["variant"], p + ".variant");
    if (find(o, "backend")) r.backend = as_string(o["backend"], p + ".backend");
    r.batch = get_int(o, "batch", p, r.batch, 1);
    r.seq = get_int(o, "seq", p, r.seq, 1);
    r.hidden = get_int(o, "hidden", p, r.hidden, 1);
    r.heads = get_int(o, "heads", p, r.heads, 1);
    r.kv_heads = get_int(o, "kv_heads", p, 0, 1);
    r.causal = get_bool(o, "causal", p, false);
    if (find(o, "test")) {
      if (find(o, "seq")) throw InputError(p + ": give either \"test\" (pp<P>, tg<N>) or \"seq\", not both");
      parse_test(as_string(o["test"], p + ".test"), r, p + ".test");
    }
    r.depth = get_int(o, "depth", p, 0, 0);
    if (r.depth > kMaxDecodeDepth)
      throw InputError(p + ".depth: expected at most " + std::to_string(kMaxDecodeDepth) + " positions, found " +
                       std::to_string(r.depth));
    if (r.depth > 0 && r.phase == Phase::Forward)
      throw InputError(p + ".depth: only pp<P> and tg<N> rows have a depth (set \"test\")");
    const int64_t threads = get_int(o, "threads", p, 0, 1);
    if (threads > kMaxThreads)
      throw InputError(p + ".threads: expected at most " + std::to_string(kMaxThreads) + ", found " + std::to_string(threads));
    r.threads = static_cast<int>(threads);
    if (find(o, "cache_dtype")) {
      const std::string d = as_string(o["cache_dtype"], p + ".cache_dtype");
      if (auto t = cache_dtype_from_name(d)) r.cache_dtype = *t;
      else throw InputError(p + ".cache_dtype: expected one of " + cache_dtype_names() + ", found '" + printable(d) + "'");
    }
    if (find(o, "backend_options")) r.backend_options = require_object(o["backend_options"], p + ".backend_options");
    rows.push_back(r);
  }
  return rows;
}

BackendFactory default_backend_factory() {
  return [](const Row& row, const nlohmann::ordered_json& options) { return make_backend(row.backend, options, "backend"); };
}

namespace {

ShapeRecipe recipe_for_row(const Row& row) {
  if (!row.hf.empty()) {  // the folder's layer: its own params, whatever the shape flags
    ShapeRecipe r;
    r.params = hf_layer_params(open_hf_model(row.hf), row.hf_layer);
    r.x_inputs = {"x"};
    return r;
  }
  const bool phased = row.phase != Phase::Forward;
  ShapeRequest shape;
  shape.hidden = row.hidden, shape.heads = row.heads, shape.causal = row.causal || phased;
  shape.seq = phased ? row.depth + row.seq : row.seq;  // positions the row reaches (rope tables)
  shape.kv_heads = row.kv_heads;
  try {
    return recipe_for_shape(row.variant, shape);
  } catch (const InputError&) {
    throw InputError("--variant: unknown variant '" + printable(row.variant) + "'");
  }
}

void build_run(const Row& row, const ShapeRecipe& recipe, PreparedRun& run) {
  run.config.variant = row.variant;
  run.config.params = recipe.params;
  run.variant = make_variant(row.variant, recipe.params);
  run.options = run.variant->parse_options(recipe.options);
  run.weights = load_weights(*run.variant, row.hf.empty() ? WeightsConfig{} : hf_layer_weights(open_hf_model(row.hf), row.hf_layer));
  run.spec = run.variant->build_spec(run.weights, run.options);
}

// Self-attention inputs: one torch.rand x [batch, seq, hidden] for every input the variant takes.
void forward_inputs(const Row& row, const ShapeRecipe& recipe, TorchGenerator& gen, PreparedRun& run) {
  Tensor x = gen.rand({row.batch, row.seq, row.hidden});
  TensorMap inputs;
  for (const std::string& name : recipe.x_inputs) inputs[name] = x;
  run.inputs = run.variant->build_inputs(inputs, run.options);
}

}  // namespace

void tokens_per_second(Result& res, double tokens_per_run) {
  const std::vector<double>& ms = res.timing.cached_ms;
  if (ms.empty()) return;
  double sum = 0, sq = 0;
  for (double m : ms) sum += tokens_per_run / (m / 1e3);
  res.tokens_per_s = sum / ms.size();
  for (double m : ms) sq += std::pow(tokens_per_run / (m / 1e3) - res.tokens_per_s, 2);
  res.tokens_per_s_sd = ms.size() > 1 ? std::sqrt(sq / (ms.size() - 1)) : 0.0;
}

std::string prepare_forward(const Row& row, PreparedRun& run) {
  const ShapeRecipe recipe = recipe_for_row(row);
  if (!recipe.why_not.empty()) return recipe.why_not;
  build_run(row, recipe, run);
  TorchGenerator gen(0);
  forward_inputs(row, recipe, gen, run);
  return "";
}

void check_row_size(const Row& row) {
  const std::string what = "bench row " + row.label() + " (" + field("batch", row.batch) + ", " +
                           field("tokens", row.seq) + ", " + field("depth", row.depth) + ", " +
                           field("hidden", row.hidden) + ")";
  const int64_t positions = checked_add(row.depth, row.seq, what);
  // x [batch, seq, hidden], the four hidden x hidden projections, and for
  // prefill / generate rows the K and V cache of every position (at most
  // hidden wide each: kv_heads <= heads).
  int64_t elements = checked_mul(checked_mul(row.batch, row.seq, what), row.hidden, what);
  elements = checked_add(elements, checked_mul(checked_mul(4, row.hidden, what), row.hidden, what), what);
  if (row.phase != Phase::Forward)
    elements = checked_add(elements, checked_mul(checked_mul(row.batch, positions, what), checked_mul(2, row.hidden, what), what), what);
  check_bytes(elements, 4, what);
}

namespace {

// The row's backend, or nullptr with res.skipped set when only its -t
// thread count is what the backend lacks (-t on the reference backend skips
// that row, not the sweep); any other bad option is the user's to fix, so
// the row's own options must make a backend.
std::unique_ptr<Backend> make_row_backend(const Row& row, const BackendFactory& make, Result& res) {
  try {
    return make(row, row.effective_backend_options());
  } catch (const InputError& e) {
    if (row.threads <= 0 || row.backend_options.contains("threads")) throw;
    make(row, row.backend_options);
    res.skipped = std::string("-t: ") + e.what();
    return nullptr;
  }
}

// One forward pass per run (forward rows, and prefill rows at depth 0: a
// causal forward pass over the prompt, on every backend, decode or not).
void run_forward_row(const Row& row, const ShapeRecipe& recipe, Backend& backend, PreparedRun& run,
                     TorchGenerator& gen, int64_t warmup, int64_t reps, RateCache& rates, Result& res) {
  forward_inputs(row, recipe, gen, run);
  if (auto why = backend.supports(run.spec, run.inputs)) {
    res.skipped = *why;
    return;
  }
  res.rates = rates.with_sgemm(res.threads);
  res.peak_per_row = reset_peak_memory();
  RunRequest req;
  req.warmup = warmup;
  req.iterations = reps;
  const RunReport rep = execute_run(run, backend, req);
  res.peak_mib = peak_memory_mib();
  res.timing = rep.timing;
}

// The attention's own time as shares of the FMA peak of the ISA it ran
// (the AVX2 loop's when the backend forced its AVX2 kernels), wall and CPU.
// The FMA probe is asked for here, once the row has shown it times its
// attention, so rows that do not never pay for it.
void attention_shares(const PhaseRun& pr, bool avx2_attention, RateCache& rates, Result& res) {
  if (pr.attention_ms <= 0) return;
  const MachineRates& m = rates.with_fma(res.threads);
  res.rates.fma_gflops = m.fma_gflops, res.rates.fma_isa = m.fma_isa, res.rates.fma_avx2_gflops = m.fma_avx2_gflops;
  res.rates.fma_cpu_gflops = m.fma_cpu_gflops, res.rates.fma_avx2_cpu_gflops = m.fma_avx2_cpu_gflops;
  res.rates.fma = m.fma;
  res.attention_ms = pr.attention_ms;
  res.attention_gflops = pr.attention_flops / (pr.attention_ms * 1e6);
  const double peak = avx2_attention ? res.rates.fma_avx2_gflops : res.rates.fma_gflops;
  const double peak_cpu = avx2_attention ? res.rates.fma_avx2_cpu_gflops : res.rates.fma_cpu_gflops;
  if (peak > 0) res.fma_percent = 100.0 * res.attention_gflops / peak;
  res.attention_cpu_ms = pr.attention_cpu_ms;
  if (pr.attention_cpu_ms > 0 && peak_cpu > 0)
    res.fma_cpu_percent = 100.0 * pr.attention_flops / (pr.attention_cpu_ms * 1e6) / peak_cpu;
}

// A prefill or generate row on a KV-cache session: the timed phase, then,
// untimed, the cache format's error against float64 for generate rows.
// avx2_attention: the backend's attention kernel runs AVX2 (describe()'s
// attention_isa), so its FMA share is of the AVX2 loop's peak.
void run_session_row(const Row& row, Backend& backend, PreparedRun& run, TorchGenerator& gen, int64_t warmup,
                     int64_t reps, RateCache& rates, bool avx2_attention, Result& res) {
  if (auto why = backend.supports_decode(run.spec)) {
    res.skipped = *why;
    return;
  }
  Tensor x = gen.rand({row.batch, row.seq, row.hidden});
  const bool generate = row.phase == Phase::Generate;
  if (!generate) res.rates = rates.with_sgemm(res.threads);  // decode rows are held to their own bandwidth probes
  if (generate) res.read_gbs_before = rates.read_gbs_now(res.threads);
  res.peak_per_row = reset_peak_memory();
  const PhaseRun pr = run_phase(run.spec, run.weights, backend, row, x, warmup, reps);
  res.peak_mib = peak_memory_mib();
  if (generate) {
    res.read_gbs_after = rates.read_gbs_now(res.threads);
    res.rates.read_gbs = std::max(res.read_gbs_before, res.read_gbs_after);
  }
  res.timing = pr.timing;
  res.bytes_per_token = pr.bytes_per_token;
  if (generate && (backend.name() != "reference" || row.cache_dtype != CacheDtype::Float32) &&
      !decode_error_too_costly(run.spec, row.batch, row.depth, std::min(row.seq, kErrorTokens)))
    res.cache_error = phase_error(run.spec, backend, row, x);
  attention_shares(pr, avx2_attention, rates, res);
  const nlohmann::json info = backend.describe();
  if (info.contains("decode_tuning") && info["decode_tuning"].contains("last"))
    res.decode_tuning = info["decode_tuning"]["last"];
}

}  // namespace

void check_rows(const std::vector<Row>& rows, const BackendFactory& make) {
  std::set<std::string> made;
  for (const Row& row : rows) {
    recipe_for_row(row);  // refuses an unknown variant
    if (!made.insert(row.backend + " " + row.effective_backend_options().dump()).second) continue;
    Result unused;
    make_row_backend(row, make, unused);
  }
}

Result run_row(const Row& row, int64_t warmup, int64_t repetitions, RateCache& rates, const BackendFactory& make) {
  Result res;
  res.row = row;
  res.timestamp = utc_timestamp();
  res.probes = rates.mode();
  const ShapeRecipe recipe = recipe_for_row(row);
  std::unique_ptr<Backend> backend = make_row_backend(row, make, res);
  if (!backend) return res;
  const nlohmann::json info = backend->describe();
  res.threads = backend->threads();
  res.simd = info.contains("simd") && info["simd"].is_string() ? info["simd"].get<std::string>() : "unknown";
  if (!recipe.why_not.empty()) {
    res.skipped = recipe.why_not;
    return res;
  }
  PreparedRun run;
  build_run(row, recipe, run);
  TorchGenerator gen(0);
  const int64_t w = row.max_warmup >= 0 ? std::min(warmup, row.max_warmup) : warmup;
  const int64_t n = row.max_repetitions > 0 ? std::min(repetitions, row.max_repetitions) : repetitions;
  if (row.phase == Phase::Forward || (row.phase == Phase::Prefill && row.depth == 0 && !row.prefill_session))
    run_forward_row(row, recipe, *backend, run, gen, w, n, rates, res);
  else
    run_session_row(row, *backend, run, gen, w, n, rates,
                    info.contains("attention_isa") && info["attention_isa"] == "avx2", res);
  if (!res.skipped.empty()) return res;
  tokens_per_second(res, static_cast<double>(row.batch * row.seq));
  const double sec = res.timing.median_ms / 1e3;
  if (row.phase == Phase::Generate) {
    if (sec > 0 && res.rates.read_gbs > 0)
      res.bandwidth_percent = 100.0 * res.bytes_per_token * row.seq / sec / (res.rates.read_gbs * 1e9);
  } else if (res.rates.sgemm_gflops > 0) {
    res.sgemm_percent = 100.0 * res.timing.gflops_cached() / res.rates.sgemm_gflops;
  }
  return res;
}

}  // namespace mha::bench
