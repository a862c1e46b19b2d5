// `mha run --config FILE`: prints the output as PyTorch does, timings of the
// first and the cached runs, and the comparison with the configured
// reference (exit 1 when it fails).
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "backends/registry.h"
#include "cli/commands.h"
#include "cli/key_values.h"
#include "cli/validators.h"
#include "compare/report.h"
#include "config/hf_config.h"
#include "io/output_set.h"
#include "io/tensor_file.h"
#include "parallel/world.h"
#include "parallel/driver.h"
#include "run/runner.h"
#include "run/stage_compare.h"
#include "tensor/format.h"
#include "util/error.h"

namespace mha::cli {

namespace {

struct RunFlags {
  std::string config, backend, output, attn_weights, dump_stages, json, save_weights;
  int64_t warmup = -1, iterations = -1;
  bool compare_stages = false;
  // --hf DIR: layer `layer` of a Hugging Face folder on x randn [batch, seq, hidden]
  std::string hf;
  int64_t layer = 0, seq = kDefaultHfSeq, batch = 1;
  uint64_t seed = 0;
  std::vector<std::string> backend_options;  // KEY=VALUE, over the config's
};

// The config `mha run --hf DIR` stands for.
RunConfig hf_flags_config(const RunFlags& f) {
  ordered_json j = {{"model", {{"hf", f.hf}, {"layer", f.layer}}}};
  RunConfig c = parse_config(j, ".", "--hf " + f.hf);
  c.name = std::filesystem::path(f.hf).lexically_normal().filename().string() + " layer " + std::to_string(f.layer);
  c.inputs[0].shape = {f.batch, f.seq, c.inputs[0].shape[2]};
  c.inputs_seed = f.seed;
  return c;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

bool ends_with_ci(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (std::size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

// --save-weights writes a whole state_dict, which only .safetensors and .npz
// hold; anything else would be a file whose content contradicts its name.
void check_save_weights_name(const std::string& path) {
  if (!ends_with_ci(path, ".safetensors") && !ends_with_ci(path, ".npz"))
    throw InputError("--save-weights " + path + ": expected a file name ending in .safetensors or .npz");
}

// Before any work: every file the run reads is an input, every flag that
// writes is an output; OutputSet refuses collisions and unwritable folders.
void plan_outputs(const RunFlags& f, const RunConfig& c, io::OutputSet& outs) {
  if (!f.config.empty()) outs.add_input(f.config);
  if (c.weights.kind == WeightsConfig::Kind::File || c.weights.kind == WeightsConfig::Kind::Dir)
    outs.add_input(c.weights.path);
  for (const InputConfig& ic : c.inputs)
    if (ic.kind == InputConfig::Kind::File) outs.add_input(io::tensor_spec_file(ic.path));
  if (c.reference) outs.add_input(io::tensor_spec_file(c.reference->file));
  if (!f.save_weights.empty()) check_save_weights_name(f.save_weights);
  if (!f.output.empty()) outs.add_file("--output", f.output);
  if (!f.attn_weights.empty()) outs.add_file("--attn-weights", f.attn_weights);
  if (!f.save_weights.empty()) outs.add_file("--save-weights", f.save_weights);
  if (!f.json.empty() && f.json != "-") outs.add_file("--json", f.json);
  if (!f.dump_stages.empty()) outs.add_folder("--dump-stages", f.dump_stages);
}

// The state_dict as the module names it (slot order) into `file`, as .npz
// or .safetensors as `name` (the target, whose extension `file`, a
// temporary, lacks) says.
void save_weights(const std::string& file, const std::string& name, const Variant& v, const TensorMap& w) {
  NamedTensors named;
  for (const WeightSlot& s : v.weight_slots())
    if (!s.buffer) named.emplace_back(s.name, w.at(s.name));
  if (ends_with_ci(name, ".npz")) io::write_npz(file, named);
  else io::write_safetensors(file, named);
}

nlohmann::json report_json(const PreparedRun& run, const RunReport& rep, const nlohmann::json& stages) {
  nlohmann::json j;
  j["name"] = run.config.name;
  j["config"] = run.config.file;
  j["variant"] = run.config.variant;
  j["backend"] = rep.backend_name;
  j["backend_info"] = rep.backend_info;
  const Tensor& out = rep.result.output;
  if (rep.output_rows) {  // not held whole: more than 100000 values, which the report leaves out anyway
    j["output"] = {{"shape", rep.output_rows->shape}, {"dtype", dtype_name(rep.output_rows->dtype)}};
  } else {
    j["output"] = {{"shape", out.shape()}, {"dtype", dtype_name(out.dtype())}};
    if (out.numel() <= 100000) j["output"]["values"] = out.to_f64();
  }
  if (rep.result.weights) j["attn_weights"] = {{"shape", rep.result.weights->shape()}};
  j["timing"] = timing_json(rep.timing);
  j["cache"] = {{"hits", rep.cache.hits}, {"misses", rep.cache.misses}};
  if (rep.decode) j["decode"] = decode_json(*rep.decode);
  if (rep.comparison) j["comparison"] = compare::to_json(*rep.comparison);
  if (!stages.is_null()) j["stage_comparison"] = stages;
  return j;
}

std::string text_report(const RunConfig& config, const RunReport& rep) {
  std::string s;
  char buf[512];
  const Tensor& out = rep.result.output;
  const std::string what = config.model ? "layer " + std::to_string(config.model->layer) + " of " + config.model->hf +
                                              " (variant " + config.variant + ")"
                                        : "variant " + config.variant;
  s += config.name + ": " + what + " on backend " + rep.backend_name + "\n";
  // A backend that emulates another's kernels names whose, and its notes.
  const nlohmann::json& info = rep.backend_info;
  if (info.contains("tt_metal"))
    s += "tt_metal: " + info["tt_metal"]["profile"].get<std::string>() + " (tenstorrent/tt-metal " +
         info["tt_metal"]["commit"].get<std::string>() + ")\n";
  if (info.contains("notes"))
    for (const auto& n : info["notes"]) s += "note: " + n.get<std::string>() + "\n";
  if (rep.output_rows) {  // a ring run's output too large to hold: the rows the summary shows
    const OutputRows& rows = *rep.output_rows;
    s += "output:\n" + format_torch_rows(rows.rows, rows.index, rows.shape) + "\n";
    s += "shape " + shape_str(rows.shape) + ", dtype " + dtype_name(rows.dtype) + "\n";
  } else {
    s += "output:\n" + format_torch(out) + "\n";
    s += "shape " + shape_str(out.shape()) + ", dtype " + dtype_name(out.dtype()) + "\n";
  }
  if (rep.result.weights) {
    s += "attention weights:\n" + format_torch(*rep.result.weights) + "\n";
    s += "shape " + shape_str(rep.result.weights->shape()) + "\n";
  }
  const Timing& t = rep.timing;
  std::snprintf(buf, sizeof buf, "first run: %s ms (%s GFLOP/s), includes building the plan\n",
                fmt("%.3f", t.first_ms).c_str(), fmt("%.2f", t.gflops_first()).c_str());
  s += buf;
  if (t.cached_ms.empty()) {
    s += "cached runs: none (iterations 0)\n";
  } else {
    std::snprintf(buf, sizeof buf, "cached runs (%zu): median %s ms, min %s ms, max %s ms (%s GFLOP/s)\n",
                  t.cached_ms.size(), fmt("%.3f", t.median_ms).c_str(), fmt("%.3f", t.min_ms).c_str(),
                  fmt("%.3f", t.max_ms).c_str(), fmt("%.2f", t.gflops_cached()).c_str());
    s += buf;
  }
  if (rep.decode) {
    const DecodeTiming& d = *rep.decode;
    std::snprintf(buf, sizeof buf, "decode: prefill of %lld tokens %s ms (median); %lld steps: median %s ms, min %s ms, "
                  "max %s ms per token (%s tokens/s); KV cache %s, %lld bytes\n",
                  static_cast<long long>(d.prompt), fmt("%.3f", d.prefill_ms).c_str(), static_cast<long long>(d.tokens),
                  fmt("%.3f", d.step_median_ms).c_str(), fmt("%.3f", d.step_min_ms).c_str(),
                  fmt("%.3f", d.step_max_ms).c_str(), fmt("%.1f", d.tokens_per_s()).c_str(),
                  d.cache_format.c_str(), static_cast<long long>(d.cache_bytes));
    s += buf;
    if (d.error) {
      std::snprintf(buf, sizeof buf, "decode: KV cache %s error against a float64 decode of the same tokens: max abs %s, "
                    "relative L2 %s\n", d.cache_format.c_str(), fmt("%.3g", d.error->max_abs).c_str(),
                    fmt("%.3g", d.error->rel_l2).c_str());
      s += buf;
    } else if (!d.error_skipped.empty()) {
      s += "decode: KV cache " + d.cache_format + " error against float64 not computed: " + d.error_skipped + "\n";
    }
    if (d.depth > 0) {
      std::snprintf(buf, sizeof buf, "decode: after a synthetic context of %lld positions (timing only: the output is "
                    "not a causal run's)\n", static_cast<long long>(d.depth));
      s += buf;
    }
  }
  std::snprintf(buf, sizeof buf, "plan cache: %lld hits, %lld misses\n", static_cast<long long>(rep.cache.hits),
                static_cast<long long>(rep.cache.misses));
  s += buf;
  return s;
}

// The run's backend, made before any work, so that a bad option costs
// nothing: -b, then the config's options with --backend-option's over them
// (a flag's key replaces the config's). A refusal names where the bad option
// came from: the config when its own options fail alone, else the flag. The
// merged options stay in `config`: ranks make their backends from it.
std::unique_ptr<Backend> make_run_backend(const RunFlags& f, const std::string& label, RunConfig& config) {
  const nlohmann::ordered_json flag_options = parse_key_values(f.backend_options, "--backend-option");
  // The config's backend options are the named backend's (tt_metal, device,
  // ...): another backend takes none of them, so `-b reference` runs a
  // tt-sim config's float64 oracle.
  if (!f.backend.empty() && f.backend != config.backend) {
    config.backend = f.backend;
    config.backend_options = nlohmann::ordered_json::object();
  }
  if (flag_options.empty()) return make_backend(config.backend, config.backend_options, label + ": backend");
  nlohmann::ordered_json merged = config.backend_options;
  merged.update(flag_options);
  try {
    std::unique_ptr<Backend> backend = make_backend(config.backend, merged, "--backend-option: backend");
    config.backend_options = std::move(merged);
    return backend;
  } catch (const InputError&) {
    make_backend(config.backend, config.backend_options, label + ": backend");  // throws when the config is at fault
    throw;
  }
}

int run_command(const RunFlags& f) {
  // Under mpirun only rank 0 reads and writes; the others run what it sends.
  if (parallel::rank() != 0) return serve_rank();
  parallel::WorkerRelease release;
  if (f.config.empty() == f.hf.empty()) throw InputError("mha run: give --config FILE or --hf DIR (one of them)");
  RunConfig config = f.hf.empty() ? load_config(f.config) : hf_flags_config(f);
  const std::string label = f.hf.empty() ? f.config : "--hf " + f.hf;
  if (parallel::size() > 1 && !config.parallel)
    throw InputError(label + ": mha runs on " + std::to_string(parallel::size()) +
                     " MPI ranks, but the config has no \"parallel\" key");
  std::unique_ptr<Backend> backend = make_run_backend(f, label, config);
  io::OutputSet outs;
  plan_outputs(f, config, outs);
  const bool ring = run_mode(config) == RunMode::Sequence;
  PreparedRun run;
  try {
    run = prepare_for(config);
  } catch (const InputError& e) {
    throw InputError(label + ": " + e.what());  // which config the path inside it belongs to
  }

  RunRequest req;
  req.need_weights = !f.attn_weights.empty();
  req.collect_stages = !f.dump_stages.empty() || f.compare_stages;
  if (f.warmup >= 0) req.warmup = f.warmup;
  if (f.iterations >= 0) req.iterations = f.iterations;
  if (ring && !f.output.empty()) req.output_file = outs.temporary(f.output);
  RunReport rep = drive_run(run, *backend, req, release);

  std::string text = text_report(config, rep);
  nlohmann::json stages_json;
  if (f.compare_stages) {
    const std::vector<StageComparison> sc = compare_stages(run.spec, run.inputs, rep.result.stages);
    text += format_stage_comparison(sc);
    stages_json = stage_comparison_json(sc);
  }
  int code = 0;
  if (rep.comparison) {
    text += "comparison with reference " + config.reference->file + ":\n" + compare::format_text(*rep.comparison);
    if (!rep.comparison->passed) code = 1;
  }

  // All outputs are staged, then put in place together: a failure anywhere
  // above leaves every output file as it was.
  const Tensor& out = rep.result.output;
  if (rep.output_written) outs.mark_staged(f.output);  // the ring wrote it row by row
  else if (!f.output.empty()) outs.stage(f.output, [&](const std::string& tmp) { io::write_npy(tmp, out); });
  if (!f.save_weights.empty())
    outs.stage(f.save_weights,
               [&](const std::string& tmp) { save_weights(tmp, f.save_weights, *run.variant, run.weights); });
  if (!f.attn_weights.empty()) {
    if (!rep.result.weights) throw InputError("--attn-weights: backend " + rep.backend_name + " returned no weights");
    outs.stage(f.attn_weights, [&](const std::string& tmp) { io::write_npy(tmp, *rep.result.weights); });
  }
  if (!f.dump_stages.empty())
    for (const auto& stage : rep.result.stages) {
      const Tensor& t = stage.second;  // a named reference: C++17 lambdas cannot capture a structured binding
      outs.stage_in_folder(f.dump_stages, stage.first + ".npy", [&](const std::string& tmp) { io::write_npy(tmp, t); });
    }
  const std::string json = f.json.empty() ? "" : report_json(run, rep, stages_json).dump(2) + "\n";
  if (!f.json.empty() && f.json != "-") outs.stage_bytes(f.json, json);
  outs.commit();

  // `--json -`: stdout carries the JSON document and nothing else.
  if (f.json == "-") std::fputs(json.c_str(), stdout);
  else std::fputs(text.c_str(), stdout);
  return code;
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto* sub = app.add_subcommand("run", "Run an attention variant from a JSON config");
  sub->add_option("--config,-c", flags->config, "config file (see configs/)");
  sub->add_option("--hf", flags->hf, "a Hugging Face model folder (config.json + safetensors) instead of --config");
  sub->add_option("--layer", flags->layer, "--hf: the decoder layer whose attention runs (default 0)")
      ->check(integer_at_least(0));
  sub->add_option("--seq", flags->seq, "--hf: tokens of the random input x (default 16)")->check(integer_at_least(1));
  sub->add_option("--batch", flags->batch, "--hf: batch of the random input x (default 1)")->check(integer_at_least(1));
  sub->add_option("--seed", flags->seed, "--hf: seed of the random input x (default 0)");
  sub->add_option("--backend,-b", flags->backend, "override the config's backend: " + backend_help());
  sub->add_option("--backend-option", flags->backend_options,
                  "KEY=VALUE over the config's backend options, repeatable (tt-sim: tt_metal=2024, dtype=bfloat8_b, "
                  "threads=1)");
  sub->add_option("--output,-o", flags->output, "save the output tensor as .npy");
  sub->add_option("--attn-weights", flags->attn_weights, "save the attention weights as .npy");
  sub->add_option("--dump-stages", flags->dump_stages, "save every intermediate tensor as DIR/NAME.npy");
  sub->add_flag("--compare-stages", flags->compare_stages,
                "compare every stage with the cpu backend's (PCC, max abs diff)");
  sub->add_option("--save-weights", flags->save_weights, "save the weights used as .safetensors (or .npz)");
  sub->add_option("--json", flags->json, "write the whole report as JSON (- for stdout)");
  sub->add_option("--warmup", flags->warmup, "untimed runs after the first (overrides runs.warmup)")
      ->check(integer_at_least(0));
  sub->add_option("--iterations,-n", flags->iterations,
                  "timed cached runs (overrides runs.iterations; 0: the first run only, for runs of minutes)")
      ->check(integer_at_least(0));
  sub->callback([flags, &exit_code]() { exit_code = run_command(*flags); });
}

}  // namespace mha::cli
