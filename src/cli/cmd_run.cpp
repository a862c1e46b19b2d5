// `mha run --config FILE`: prints the output as PyTorch does, timings of the
// first and the cached runs, and the comparison with the configured
// reference (exit 1 when it fails).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "compare/report.h"
#include "io/tensor_file.h"
#include "run/runner.h"
#include "tensor/format.h"
#include "util/error.h"

namespace mha::cli {

namespace {

struct RunFlags {
  std::string config, backend, output, attn_weights, dump_stages, json, save_weights;
  int64_t warmup = -1, iterations = -1;
  bool compare_stages = false;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void dump_stages(const std::string& dir, const NamedTensors& stages) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, t] : stages) io::write_npy(dir + "/" + name + ".npy", t);
}

// The state_dict as the module names it (slot order), as .safetensors or .npz.
void save_weights(const std::string& path, const Variant& v, const TensorMap& w) {
  NamedTensors named;
  for (const WeightSlot& s : v.weight_slots())
    if (!s.buffer) named.emplace_back(s.name, w.at(s.name));
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0) io::write_npz(path, named);
  else io::write_safetensors(path, named);
}

nlohmann::json report_json(const PreparedRun& run, const RunReport& rep) {
  nlohmann::json j;
  j["name"] = run.config.name;
  j["config"] = run.config.file;
  j["variant"] = run.config.variant;
  j["backend"] = rep.backend_name;
  j["backend_info"] = rep.backend_info;
  const Tensor& out = rep.result.output;
  j["output"] = {{"shape", out.shape()}, {"dtype", dtype_name(out.dtype())}};
  if (out.numel() <= 100000) j["output"]["values"] = out.to_f64();
  if (rep.result.weights) j["attn_weights"] = {{"shape", rep.result.weights->shape()}};
  j["timing"] = timing_json(rep.timing);
  j["cache"] = {{"hits", rep.cache.hits}, {"misses", rep.cache.misses}};
  if (rep.comparison) j["comparison"] = compare::to_json(*rep.comparison);
  return j;
}

// Like TT-NN's comparison mode: every stage of this backend against the cpu
// backend's stage of the same name on the same spec and inputs.
void print_stage_comparison(const PreparedRun& run, const NamedTensors& stages) {
  std::unique_ptr<Backend> cpu = make_backend("cpu", nlohmann::ordered_json::object(), "--compare-stages");
  RunOptions ro;
  ro.collect_stages = true;
  AttentionResult want = cpu->run(run.spec, run.inputs, ro);
  std::printf("stages vs cpu backend:\n%-16s %-18s %10s %12s\n", "stage", "shape", "pcc", "max abs diff");
  for (const auto& [name, t] : stages) {
    const Tensor* ref = nullptr;
    for (const auto& [n, c] : want.stages)
      if (n == name) ref = &c;
    if (!ref || ref->shape() != t.shape()) {
      std::printf("%-16s %-18s %10s %12s\n", name.c_str(), shape_str(t.shape()).c_str(), "-", "(no cpu stage)");
      continue;
    }
    compare::Report r = compare::compare(*ref, t, compare::Options{});
    std::printf("%-16s %-18s %10s %12s\n", name.c_str(), shape_str(t.shape()).c_str(), fmt("%.6f", r.pcc).c_str(),
                r.max_abs_diff ? fmt("%.6g", r.max_abs_diff->value).c_str() : "-");
  }
}

int run_command(const RunFlags& f) {
  RunConfig config = load_config(f.config);
  if (!f.backend.empty()) config.backend = f.backend;
  PreparedRun run;
  try {
    run = prepare_run(config);
  } catch (const InputError& e) {
    throw InputError(f.config + ": " + e.what());  // which config the path inside it belongs to
  }
  std::unique_ptr<Backend> backend = make_backend(config.backend, config.backend_options, f.config + ": backend");

  RunRequest req;
  req.need_weights = !f.attn_weights.empty();
  req.collect_stages = !f.dump_stages.empty() || f.compare_stages;
  if (f.warmup >= 0) req.warmup = f.warmup;
  if (f.iterations >= 1) req.iterations = f.iterations;
  RunReport rep = execute_run(run, *backend, req);

  const Tensor& out = rep.result.output;
  std::printf("%s: variant %s on backend %s\n", config.name.c_str(), config.variant.c_str(), rep.backend_name.c_str());
  std::printf("output:\n%s\n", format_torch(out).c_str());
  std::printf("shape %s, dtype %s\n", shape_str(out.shape()).c_str(), dtype_name(out.dtype()));
  if (rep.result.weights) {
    std::printf("attention weights:\n%s\n", format_torch(*rep.result.weights).c_str());
    std::printf("shape %s\n", shape_str(rep.result.weights->shape()).c_str());
  }
  const Timing& t = rep.timing;
  std::printf("first run: %s ms (%s GFLOP/s), includes building the plan\n", fmt("%.3f", t.first_ms).c_str(),
              fmt("%.2f", t.gflops_first()).c_str());
  std::printf("cached runs (%zu): median %s ms, min %s ms, max %s ms (%s GFLOP/s)\n", t.cached_ms.size(),
              fmt("%.3f", t.median_ms).c_str(), fmt("%.3f", t.min_ms).c_str(), fmt("%.3f", t.max_ms).c_str(),
              fmt("%.2f", t.gflops_cached()).c_str());
  std::printf("plan cache: %lld hits, %lld misses\n", static_cast<long long>(rep.cache.hits),
              static_cast<long long>(rep.cache.misses));

  if (!f.output.empty()) io::write_npy(f.output, out);
  if (!f.save_weights.empty()) save_weights(f.save_weights, *run.variant, run.weights);
  if (!f.attn_weights.empty()) {
    if (!rep.result.weights) throw InputError("--attn-weights: backend " + rep.backend_name + " returned no weights");
    io::write_npy(f.attn_weights, *rep.result.weights);
  }
  if (!f.dump_stages.empty()) dump_stages(f.dump_stages, rep.result.stages);
  if (f.compare_stages) print_stage_comparison(run, rep.result.stages);
  int code = 0;
  if (rep.comparison) {
    std::printf("comparison with reference %s:\n%s", config.reference->file.c_str(),
                compare::format_text(*rep.comparison).c_str());
    if (!rep.comparison->passed) code = 1;
  }
  if (!f.json.empty()) {
    std::string text = report_json(run, rep).dump(2) + "\n";
    if (f.json == "-") std::fputs(text.c_str(), stdout);
    else io::write_file_atomic(f.json, text);
  }
  return code;
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto* sub = app.add_subcommand("run", "Run an attention variant from a JSON config");
  sub->add_option("--config,-c", flags->config, "config file (see configs/)")->required();
  sub->add_option("--backend,-b", flags->backend, "override the config's backend: reference, cpu, tt-sim");
  sub->add_option("--output,-o", flags->output, "save the output tensor as .npy");
  sub->add_option("--attn-weights", flags->attn_weights, "save the attention weights as .npy");
  sub->add_option("--dump-stages", flags->dump_stages, "save every intermediate tensor as DIR/NAME.npy");
  sub->add_flag("--compare-stages", flags->compare_stages,
                "compare every stage with the cpu backend's (PCC, max abs diff)");
  sub->add_option("--save-weights", flags->save_weights, "save the weights used as .safetensors (or .npz)");
  sub->add_option("--json", flags->json, "write the whole report as JSON (- for stdout)");
  sub->add_option("--warmup", flags->warmup, "untimed runs after the first (overrides runs.warmup)");
  sub->add_option("--iterations,-n", flags->iterations, "timed cached runs (overrides runs.iterations)");
  sub->callback([flags, &exit_code]() { exit_code = run_command(*flags); });
}

}  // namespace mha::cli
