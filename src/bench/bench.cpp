#include "bench/bench.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "backends/backend.h"
#include "bench/peak_memory.h"
#include "init/torch_generator.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::bench {

std::string Row::label() const {
  return variant + " " + backend + " " + std::to_string(batch) + "x" + std::to_string(seq) + "x" +
         std::to_string(hidden) + "/" + std::to_string(heads) + (kv_heads > 0 ? ":" + std::to_string(kv_heads) : "") +
         (causal ? " causal" : "");
}

double probe_sgemm_gflops(int64_t n) {
  std::vector<float> a(n * n), b(n * n), c(n * n);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto* v : {&a, &b})
    for (float& x : *v) x = u(rng);
  double best = 1e300;
  for (int i = 0; i < 4; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::min(best, s);  // the first run warms caches and threads
  }
  return 2.0 * n * n * n / best / 1e9;
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
    check_keys(o, p, {"variant", "backend", "batch", "seq", "hidden", "heads", "kv_heads", "causal", "backend_options"});
    Row r;
    if (find(o, "variant")) r.variant = as_string(o["variant"], p + ".variant");
    if (find(o, "backend")) r.backend = as_string(o["backend"], p + ".backend");
    r.batch = get_int(o, "batch", p, r.batch, 1);
    r.seq = get_int(o, "seq", p, r.seq, 1);
    r.hidden = get_int(o, "hidden", p, r.hidden, 1);
    r.heads = get_int(o, "heads", p, r.heads, 1);
    r.kv_heads = get_int(o, "kv_heads", p, 0, 1);
    r.causal = get_bool(o, "causal", p, false);
    if (find(o, "backend_options")) r.backend_options = require_object(o["backend_options"], p + ".backend_options");
    rows.push_back(r);
  }
  return rows;
}

Result run_row(const Row& row, int64_t warmup, int64_t repetitions, double sgemm_gflops) {
  Result res;
  res.row = row;
  ShapeRequest shape;
  shape.hidden = row.hidden, shape.heads = row.heads, shape.seq = row.seq, shape.causal = row.causal;
  shape.kv_heads = row.kv_heads;
  ShapeRecipe recipe;
  try {
    recipe = recipe_for_shape(row.variant, shape);
  } catch (const InputError&) {
    throw InputError("--variant: unknown variant '" + printable(row.variant) + "'");
  }
  if (!recipe.why_not.empty()) {
    res.skipped = recipe.why_not;
    return res;
  }
  PreparedRun run;
  run.config.variant = row.variant;
  run.config.params = recipe.params;
  run.variant = make_variant(row.variant, recipe.params);
  run.options = run.variant->parse_options(recipe.options);
  run.weights = load_weights(*run.variant, WeightsConfig{});
  run.spec = run.variant->build_spec(run.weights, run.options);
  TorchGenerator gen(0);
  Tensor x = gen.rand({row.batch, row.seq, row.hidden});
  TensorMap inputs;
  for (const std::string& name : recipe.x_inputs) inputs[name] = x;
  run.inputs = run.variant->build_inputs(inputs, run.options);

  std::unique_ptr<Backend> backend = make_backend(row.backend, row.backend_options, "backend");
  if (auto why = backend->supports(run.spec, run.inputs)) {
    res.skipped = *why;
    return res;
  }
  reset_peak_memory();
  RunRequest req;
  req.warmup = row.max_warmup >= 0 ? std::min(warmup, row.max_warmup) : warmup;
  req.iterations = row.max_repetitions > 0 ? std::min(repetitions, row.max_repetitions) : repetitions;
  RunReport rep = execute_run(run, *backend, req);
  res.peak_mib = peak_memory_mib();
  res.timing = rep.timing;
  res.sgemm_percent = sgemm_gflops > 0 ? 100.0 * rep.timing.gflops_cached() / sgemm_gflops : 0;
  return res;
}

nlohmann::json result_json(const Result& r) {
  nlohmann::json j = {{"label", r.row.label()},  {"variant", r.row.variant}, {"backend", r.row.backend},
                      {"batch", r.row.batch},    {"seq", r.row.seq},         {"hidden", r.row.hidden},
                      {"heads", r.row.heads},    {"causal", r.row.causal}};
  if (!r.skipped.empty()) {
    j["skipped"] = r.skipped;
    return j;
  }
  if (r.row.kv_heads > 0) j["kv_heads"] = r.row.kv_heads;
  j["timing"] = timing_json(r.timing);
  j["sgemm_percent"] = r.sgemm_percent;
  j["peak_mib"] = r.peak_mib;
  return j;
}

std::string format_table(const std::vector<Result>& results, const std::string& format, double sgemm_gflops) {
  std::string out;
  char buf[512];
  if (format == "json") {
    nlohmann::json j = {{"sgemm_gflops", sgemm_gflops}, {"rows", nlohmann::json::array()}};
    for (const Result& r : results) j["rows"].push_back(result_json(r));
    return j.dump(2) + "\n";
  }
  if (format == "jsonl") {
    for (const Result& r : results) {
      nlohmann::json j = result_json(r);
      j["sgemm_gflops"] = sgemm_gflops;
      out += j.dump() + "\n";
    }
    return out;
  }
  const bool md = format == "md";
  if (!md && format != "csv") throw InputError("-o: expected md, csv, json or jsonl, found '" + format + "'");
  if (md) {
    std::snprintf(buf, sizeof buf, "sgemm: %.1f GFLOP/s (OpenBLAS, probed at start)\n\n", sgemm_gflops);
    out += buf;
    out += "| variant | backend | shape BxSxE/H | causal | first ms | cached mean ± std ms | median ms | GFLOP/s | % sgemm | peak MiB |\n";
    out += "|---|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  } else {
    out += "variant,backend,batch,seq,hidden,heads,causal,first_ms,mean_ms,stddev_ms,median_ms,gflops,sgemm_percent,peak_mib\n";
  }
  for (const Result& r : results) {
    const Row& w = r.row;
    std::string shape = std::to_string(w.batch) + "x" + std::to_string(w.seq) + "x" + std::to_string(w.hidden) + "/" +
                        std::to_string(w.heads) + (w.kv_heads > 0 ? ":" + std::to_string(w.kv_heads) : "");
    if (!r.skipped.empty()) {
      out += md ? "| " + w.variant + " | " + w.backend + " | " + shape + " | " + (w.causal ? "yes" : "no") +
                      " | skipped: " + r.skipped + " |||||||\n"
                : w.variant + "," + w.backend + "," + std::to_string(w.batch) + "," + std::to_string(w.seq) + "," +
                      std::to_string(w.hidden) + "," + std::to_string(w.heads) + "," + (w.causal ? "1" : "0") +
                      ",,,,,,,\n";
      continue;
    }
    const Timing& t = r.timing;
    if (md)
      std::snprintf(buf, sizeof buf, "| %s | %s | %s | %s | %.3f | %.3f ± %.3f | %.3f | %.1f | %.1f | %.1f |\n",
                    w.variant.c_str(), w.backend.c_str(), shape.c_str(), w.causal ? "yes" : "no", t.first_ms,
                    t.mean_ms, t.stddev_ms, t.median_ms, t.gflops_cached(), r.sgemm_percent, r.peak_mib);
    else
      std::snprintf(buf, sizeof buf, "%s,%s,%lld,%lld,%lld,%lld,%d,%.4f,%.4f,%.4f,%.4f,%.3f,%.2f,%.1f\n",
                    w.variant.c_str(), w.backend.c_str(), static_cast<long long>(w.batch),
                    static_cast<long long>(w.seq), static_cast<long long>(w.hidden), static_cast<long long>(w.heads),
                    w.causal ? 1 : 0, t.first_ms, t.mean_ms, t.stddev_ms, t.median_ms, t.gflops_cached(),
                    r.sgemm_percent, r.peak_mib);
    out += buf;
  }
  return out;
}

}  // namespace mha::bench
