// `mha bench` output: one row per result in md, csv, json or jsonl. Every
// machine-readable row carries where and how it ran (build, CPU, SIMD path,
// threads, time, backend options) so rows collected from many runs stay
// comparable.
#include <cstdio>

#include "bench/bench.h"
#include "bench/build_info.h"
#include "util/error.h"

namespace mha::bench {

namespace {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prefill: return "prefill";
    case Phase::Generate: return "generate";
    case Phase::Forward: break;
  }
  return "forward";
}

std::string shape_text(const Row& w) {
  return std::to_string(w.batch) + "x" + std::to_string(w.seq) + "x" + std::to_string(w.hidden) + "/" +
         std::to_string(w.heads) + (w.kv_heads > 0 ? ":" + std::to_string(w.kv_heads) : "");
}

// RFC 4180: quoted when it holds a comma, quote or newline; quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

nlohmann::json result_json(const Result& r) {
  const Row& w = r.row;
  nlohmann::json j = {{"label", w.label()},   {"variant", w.variant},        {"backend", w.backend},
                      {"test", w.test()},     {"phase", phase_name(w.phase)}, {"batch", w.batch},
                      {"seq", w.seq},         {"depth", w.depth},            {"hidden", w.hidden},
                      {"heads", w.heads},     {"kv_heads", w.kv_heads > 0 ? w.kv_heads : w.heads},
                      {"causal", w.causal || w.phase != Phase::Forward}};
  if (w.phase != Phase::Forward) j["cache_dtype"] = cache_dtype_name(w.cache_dtype);
  j["build"] = build_commit();
  j["cpu"] = cpu_model();
  j["simd"] = r.simd.empty() ? "unknown" : r.simd;
  j["threads"] = r.threads;
  j["timestamp"] = r.timestamp;
  j["backend_options"] = w.effective_backend_options();
  if (!r.skipped.empty()) {
    j["skipped"] = r.skipped;
    return j;
  }
  j["timing"] = timing_json(r.timing);
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_sd"] = r.tokens_per_s_sd;
  j["sgemm_gflops"] = r.rates.sgemm_gflops;
  j["read_gbs"] = r.rates.read_gbs;
  if (w.phase == Phase::Generate) {
    j["bytes_per_token"] = r.bytes_per_token;
    j["bandwidth_percent"] = r.bandwidth_percent;
  } else {
    j["sgemm_percent"] = r.sgemm_percent;
  }
  j["peak_mib"] = r.peak_mib;
  j["peak_scope"] = r.peak_per_row ? "row" : "process";
  return j;
}

std::string format_table(const std::vector<Result>& results, const std::string& format, double sgemm_gflops) {
  std::string out;
  if (format == "json") {
    nlohmann::json j = {{"build", build_commit()}, {"cpu", cpu_model()}, {"sgemm_gflops", sgemm_gflops},
                        {"rows", nlohmann::json::array()}};
    for (const Result& r : results) j["rows"].push_back(result_json(r));
    return j.dump(2) + "\n";
  }
  if (format == "jsonl") {
    for (const Result& r : results) out += result_json(r).dump() + "\n";
    return out;
  }
  if (format == "csv") {
    out += "variant,backend,test,batch,seq,depth,hidden,heads,kv_heads,causal,threads,first_ms,mean_ms,stddev_ms,"
           "median_ms,tokens_per_s,tokens_per_s_sd,gflops,sgemm_percent,bandwidth_percent,bytes_per_token,"
           "sgemm_gflops,read_gbs,peak_mib,peak_scope,cache_dtype,build,cpu,simd,timestamp,backend_options,skipped\n";
    for (const Result& r : results) {
      const Row& w = r.row;
      const bool ok = r.skipped.empty(), gen = w.phase == Phase::Generate;
      const Timing& t = r.timing;
      std::vector<std::string> f = {
          csv_field(w.variant), csv_field(w.backend), w.test(), std::to_string(w.batch), std::to_string(w.seq),
          std::to_string(w.depth), std::to_string(w.hidden), std::to_string(w.heads),
          std::to_string(w.kv_heads > 0 ? w.kv_heads : w.heads), (w.causal || w.phase != Phase::Forward) ? "1" : "0",
          std::to_string(r.threads), ok ? num(t.first_ms, "%.4f") : "", ok ? num(t.mean_ms, "%.4f") : "",
          ok ? num(t.stddev_ms, "%.4f") : "", ok ? num(t.median_ms, "%.4f") : "",
          ok ? num(r.tokens_per_s, "%.2f") : "", ok ? num(r.tokens_per_s_sd, "%.2f") : "",
          ok ? num(t.gflops_cached(), "%.3f") : "", ok && !gen ? num(r.sgemm_percent, "%.2f") : "",
          ok && gen ? num(r.bandwidth_percent, "%.2f") : "", ok && gen ? num(r.bytes_per_token, "%.0f") : "",
          ok ? num(r.rates.sgemm_gflops, "%.1f") : "", ok ? num(r.rates.read_gbs, "%.2f") : "",
          ok ? num(r.peak_mib, "%.1f") : "", ok ? (r.peak_per_row ? "row" : "process") : "",
          w.phase != Phase::Forward ? cache_dtype_name(w.cache_dtype) : "", csv_field(build_commit()),
          csv_field(cpu_model()), csv_field(r.simd), r.timestamp, csv_field(w.effective_backend_options().dump()),
          csv_field(r.skipped)};
      for (std::size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
      out += "\n";
    }
    return out;
  }
  if (format != "md") throw InputError("-o: expected md, csv, json or jsonl, found '" + format + "'");
  out += "build " + std::string(build_commit()) + ", CPU " + cpu_model() + "\n";
  out += "sgemm: " + num(sgemm_gflops, "%.1f") + " GFLOP/s (OpenBLAS, probed at start)\n\n";
  out += "| variant | backend | test | shape BxSxE/H[:Hkv] | depth | causal | threads | first ms | mean ± sd ms | "
         "tokens/s ± sd | GFLOP/s | % peak | peak MiB |\n";
  out += "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Result& r : results) {
    const Row& w = r.row;
    std::string head = "| " + w.variant + " | " + w.backend + " | " + w.test() + " | " + shape_text(w) + " | " +
                       std::to_string(w.depth) + " | " + ((w.causal || w.phase != Phase::Forward) ? "yes" : "no") +
                       " | " + std::to_string(r.threads) + " | ";
    if (!r.skipped.empty()) {
      out += head + "skipped: " + r.skipped + " ||||||\n";
      continue;
    }
    const Timing& t = r.timing;
    // % of the sgemm rate for forward/prefill rows, of the read bandwidth for
    // decode rows (suffix bw).
    std::string peak = w.phase == Phase::Generate ? num(r.bandwidth_percent, "%.1f bw") : num(r.sgemm_percent, "%.1f");
    out += head + num(t.first_ms, "%.3f") + " | " + num(t.mean_ms, "%.3f") + " ± " + num(t.stddev_ms, "%.3f") + " | " +
           num(r.tokens_per_s, "%.1f") + " ± " + num(r.tokens_per_s_sd, "%.1f") + " | " +
           num(t.gflops_cached(), "%.1f") + " | " + peak + " | " + num(r.peak_mib, r.peak_per_row ? "%.1f" : "%.1f*") +
           " |\n";
  }
  bool process_peak = false;
  for (const Result& r : results) process_peak |= r.skipped.empty() && !r.peak_per_row;
  if (process_peak) out += "\n* the peak could not be reset per row: the process's high-water mark\n";
  return out;
}

}  // namespace mha::bench
