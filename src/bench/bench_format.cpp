// `mha bench` output: one row per result in md, csv, json or jsonl. Every
// machine-readable row carries where and how it ran (build, CPU, SIMD path,
// threads, time, backend options) so rows collected from many runs stay
// comparable.
#include <algorithm>
#include <cstdio>
#include <map>

#include "bench/bench.h"
#include "util/build_info.h"
#include "util/error.h"

namespace mha::bench {

namespace {

const char* const kNoProbes = "--probes none: no sgemm, FMA or bandwidth probe was taken, so the % of peak is left empty";

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

const char* mode_name(const ParallelStats& p) {
  if (!p.mode) return "one-process";
  return *p.mode == ParallelConfig::Mode::Sequence ? "sequence" : "heads";
}

int64_t max_bytes(const ParallelStats& p) {
  int64_t m = 0;
  for (int64_t b : p.bytes_sent_per_rank) m = std::max(m, b);
  return m;
}

// The --parallel columns, as text for the csv and md tables.
std::string bytes_list(const ParallelStats& p) {
  std::string s;
  for (std::size_t i = 0; i < p.bytes_sent_per_rank.size(); ++i)
    s += (i ? ";" : "") + std::to_string(p.bytes_sent_per_rank[i]);
  return s;
}

// The md table's cache cell: the dtype of prefill and decode rows, and a
// decode row's error against float64 ("q4_0: 3.1e-03 / 1.2e-02").
std::string cache_cell(const Result& r) {
  if (r.row.phase == Phase::Forward) return "";
  std::string s = cache_dtype_name(r.row.cache_dtype);
  if (r.cache_error) s += ": " + num(r.cache_error->max_abs, "%.1e") + " / " + num(r.cache_error->rel_l2, "%.1e");
  return s;
}

// A row's decode tuning in a line: "calibrated: pf 8K pace 16K vb 32 strip 4 keys 4".
std::string tuning_text(const Result& r) {
  const nlohmann::json& t = r.decode_tuning;
  if (!t.is_object()) return "";
  return t.value("source", std::string()) + ": " + t.value("text", std::string());
}

// Each probe a row was held against, when it was taken and whether it came
// from the cache store; under --probes none, why the % fields are missing.
void probe_fields(const Result& r, nlohmann::json& j) {
  j["probes"] = probe_mode_name(r.probes);
  if (r.probes == ProbeMode::None) j["probes_note"] = kNoProbes;
  const std::pair<std::string, const ProbeStamp*> stamps[] = {{"sgemm", &r.rates.sgemm}, {"fma", &r.rates.fma}};
  for (const auto& [name, stamp] : stamps)
    if (stamp->probed()) {
      j[name + "_probe_taken"] = stamp->taken;
      j[name + "_probe_cached"] = stamp->from_cache;
    }
}

bool any_parallel(const std::vector<Result>& results) {
  for (const Result& r : results)
    if (r.parallel) return true;
  return false;
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
  if (!r.decode_tuning.is_null()) j["decode_tuning"] = r.decode_tuning;
  probe_fields(r, j);
  if (r.parallel) {
    const ParallelStats& p = *r.parallel;
    j["mode"] = mode_name(p);
    j["ranks"] = p.ranks;
    j["threads_per_rank"] = p.threads_per_rank;
  }
  if (!r.skipped.empty()) {
    j["skipped"] = r.skipped;
    return j;
  }
  j["timing"] = timing_json(r.timing);
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_sd"] = r.tokens_per_s_sd;
  // Only the rates this row was held against, and only when probed.
  const bool gen = w.phase == Phase::Generate, bw = gen && r.rates.read_gbs > 0, fma = r.rates.fma.probed();
  if (r.rates.sgemm.probed()) j["sgemm_gflops"] = r.rates.sgemm_gflops;
  if (bw) j["read_gbs"] = r.rates.read_gbs, j["read_gbs_before"] = r.read_gbs_before, j["read_gbs_after"] = r.read_gbs_after;
  if (fma) {
    j["fma_gflops"] = r.rates.fma_gflops;
    j["fma_isa"] = r.rates.fma_isa;
    j["fma_avx2_gflops"] = r.rates.fma_avx2_gflops;
    j["fma_cpu_gflops"] = r.rates.fma_cpu_gflops;
    j["fma_avx2_cpu_gflops"] = r.rates.fma_avx2_cpu_gflops;
  }
  if (r.attention_ms >= 0) {
    j["attention_ms"] = r.attention_ms;
    j["attention_gflops"] = r.attention_gflops;
    j["attention_cpu_ms"] = r.attention_cpu_ms;
    if (fma) j["fma_percent"] = r.fma_percent, j["fma_cpu_percent"] = r.fma_cpu_percent;
  }
  if (gen) {
    j["bytes_per_token"] = r.bytes_per_token;
    if (bw) j["bandwidth_percent"] = r.bandwidth_percent;
    if (r.cache_error) {
      j["cache_max_abs_err"] = r.cache_error->max_abs;
      j["cache_rel_l2_err"] = r.cache_error->rel_l2;
    }
  } else if (r.rates.sgemm.probed()) {
    j["sgemm_percent"] = r.sgemm_percent;
  }
  j["peak_mib"] = r.peak_mib;
  j["peak_scope"] = r.peak_per_row ? "row" : "process";
  if (r.parallel) {
    const ParallelStats& p = *r.parallel;
    j["passes"] = p.passes;
    j["bytes_sent_per_rank"] = p.bytes_sent_per_rank;
    j["bytes_sent_max"] = max_bytes(p);
    j["peak_mib_rank0"] = r.peak_mib;
    j["peak_mib_max"] = p.peak_mib_max;
    if (p.mode) {
      j["baseline_threads"] = p.baseline_threads;
      j["baseline_median_ms"] = p.baseline_median_ms;
      j["efficiency_percent"] = p.efficiency_percent;
    }
  }
  return j;
}

namespace {

// The md table of a --parallel sweep: each row's one-process baseline, then
// the row across the ranks.
std::string parallel_md(const std::vector<Result>& results) {
  std::string out =
      "| variant | backend | shape BxSxE/H[:Hkv] | causal | mode | ranks | threads/rank | median ± sd ms | "
      "GFLOP/s | efficiency % | MiB sent (max rank) | peak MiB rank 0 / max |\n"
      "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Result& r : results) {
    const Row& w = r.row;
    const ParallelStats p = r.parallel.value_or(ParallelStats{});
    std::string head = "| " + w.variant + " | " + w.backend + " | " + shape_text(w) + " | " + (w.causal ? "yes" : "no") +
                       " | " + mode_name(p) + " | " + std::to_string(p.ranks) + " | " +
                       std::to_string(p.threads_per_rank) + " | ";
    if (!r.skipped.empty()) {
      out += head + "skipped: " + r.skipped + " |||||\n";
      continue;
    }
    const Timing& t = r.timing;
    out += head + num(t.median_ms, "%.3f") + " ± " + num(t.stddev_ms, "%.3f") + " | " + num(t.gflops_cached(), "%.1f") +
           " | " + (p.mode ? num(p.efficiency_percent, "%.1f") : std::string("")) + " | " +
           num(static_cast<double>(max_bytes(p)) / (1 << 20), "%.1f") + " | " + num(r.peak_mib, "%.1f") + " / " +
           num(p.peak_mib_max, "%.1f") + " |\n";
  }
  return out + "\nefficiency: 100 x the one-process row's median / the row's median (same total threads)\n";
}

// One line per row, the parallel columns when any row ran across ranks.
std::string format_csv(const std::vector<Result>& results) {
  std::string out;
  out += "variant,backend,test,batch,seq,depth,hidden,heads,kv_heads,causal,threads,first_ms,mean_ms,stddev_ms,"
         "median_ms,tokens_per_s,tokens_per_s_sd,gflops,sgemm_percent,bandwidth_percent,bytes_per_token,"
         "sgemm_gflops,read_gbs,fma_gflops,attention_ms,attention_gflops,fma_percent,fma_cpu_gflops,attention_cpu_ms,"
         "fma_cpu_percent,peak_mib,peak_scope,cache_dtype,cache_max_abs_err,cache_rel_l2_err,build,cpu,simd,"
         "timestamp,backend_options,probes,sgemm_probe_taken,sgemm_probe_cached,fma_probe_taken,fma_probe_cached,"
         "skipped,decode_tuning";
  const bool par = any_parallel(results);
  out += par ? ",mode,ranks,threads_per_rank,efficiency_percent,baseline_threads,baseline_median_ms,passes,"
               "bytes_sent_max,bytes_sent_per_rank,peak_mib_rank0,peak_mib_max\n"
             : "\n";
  for (const Result& r : results) {
    const Row& w = r.row;
    const bool ok = r.skipped.empty(), gen = w.phase == Phase::Generate;
    // Rates and shares only where the row was held to a probe (none under --probes none).
    const bool sg = ok && r.rates.sgemm.probed(), bw = ok && gen && r.rates.read_gbs > 0, fma = ok && r.rates.fma.probed();
    const bool att = ok && r.attention_ms >= 0;
    const Timing& t = r.timing;
    std::vector<std::string> f = {
        csv_field(w.variant), csv_field(w.backend), w.test(), std::to_string(w.batch), std::to_string(w.seq),
        std::to_string(w.depth), std::to_string(w.hidden), std::to_string(w.heads),
        std::to_string(w.kv_heads > 0 ? w.kv_heads : w.heads), (w.causal || w.phase != Phase::Forward) ? "1" : "0",
        std::to_string(r.threads), ok ? num(t.first_ms, "%.4f") : "", ok ? num(t.mean_ms, "%.4f") : "",
        ok ? num(t.stddev_ms, "%.4f") : "", ok ? num(t.median_ms, "%.4f") : "",
        ok ? num(r.tokens_per_s, "%.2f") : "", ok ? num(r.tokens_per_s_sd, "%.2f") : "",
        ok ? num(t.gflops_cached(), "%.3f") : "", sg && !gen ? num(r.sgemm_percent, "%.2f") : "",
        bw ? num(r.bandwidth_percent, "%.2f") : "", ok && gen ? num(r.bytes_per_token, "%.0f") : "",
        sg ? num(r.rates.sgemm_gflops, "%.1f") : "", bw ? num(r.rates.read_gbs, "%.2f") : "",
        fma ? num(r.rates.fma_gflops, "%.1f") : "", att ? num(r.attention_ms, "%.4f") : "",
        att ? num(r.attention_gflops, "%.3f") : "", att && fma ? num(r.fma_percent, "%.2f") : "",
        fma ? num(r.rates.fma_cpu_gflops, "%.1f") : "", att ? num(r.attention_cpu_ms, "%.4f") : "",
        att && fma ? num(r.fma_cpu_percent, "%.2f") : "",
        ok ? num(r.peak_mib, "%.1f") : "", ok ? (r.peak_per_row ? "row" : "process") : "",
        w.phase != Phase::Forward ? cache_dtype_name(w.cache_dtype) : "",
        ok && r.cache_error ? num(r.cache_error->max_abs, "%.4g") : "",
        ok && r.cache_error ? num(r.cache_error->rel_l2, "%.4g") : "", csv_field(build_commit()),
        csv_field(cpu_model()), csv_field(r.simd), r.timestamp, csv_field(w.effective_backend_options().dump()),
        probe_mode_name(r.probes), r.rates.sgemm.taken, r.rates.sgemm.probed() ? (r.rates.sgemm.from_cache ? "1" : "0") : "",
        r.rates.fma.taken, r.rates.fma.probed() ? (r.rates.fma.from_cache ? "1" : "0") : "", csv_field(r.skipped), csv_field(tuning_text(r))};
    if (par) {
      const ParallelStats p = r.parallel.value_or(ParallelStats{});
      const bool eff = ok && p.mode.has_value();
      for (const std::string& x :
           {std::string(mode_name(p)), std::to_string(p.ranks), std::to_string(p.threads_per_rank),
            eff ? num(p.efficiency_percent, "%.2f") : "", p.mode ? std::to_string(p.baseline_threads) : "",
            eff ? num(p.baseline_median_ms, "%.4f") : "", ok ? std::to_string(p.passes) : "",
            ok ? std::to_string(max_bytes(p)) : "", ok ? bytes_list(p) : "", ok ? num(r.peak_mib, "%.1f") : "",
            ok ? num(p.peak_mib_max, "%.1f") : ""})
        f.push_back(x);
    }
    for (std::size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}

}  // namespace

namespace {

// The md table's notes: the probe each % figure is a share of, per thread
// count, and when it was taken; why the column is empty under --probes none.
std::string probe_notes(const std::vector<Result>& results) {
  std::map<int, const MachineRates*> sgemm, fma;
  bool none = false, bw = false;
  for (const Result& r : results) {
    if (!r.skipped.empty()) continue;
    none |= r.probes == ProbeMode::None;
    bw |= r.row.phase == Phase::Generate && r.rates.read_gbs > 0;
    if (r.rates.sgemm.probed()) sgemm[r.threads] = &r.rates;
    if (r.rates.fma.probed() && r.attention_ms >= 0 && r.row.phase != Phase::Generate) fma[r.threads] = &r.rates;
  }
  std::string out;
  for (const auto& [threads, rates] : sgemm)
    out += "sgemm at " + std::to_string(threads) + " threads: " + num(rates->sgemm_gflops, "%.1f") +
           " GFLOP/s (OpenBLAS; " + rates->sgemm.text() + "); % peak: a row's GFLOP/s over it\n";
  for (const auto& [threads, rates] : fma)
    out += "fma peak at " + std::to_string(threads) + " threads: " + num(rates->fma_gflops, "%.1f") + " GFLOP/s (" +
           rates->fma_isa + "; " + rates->fma.text() + "); fma: the attention's own GFLOP/s over it\n";
  if (bw) out += "bw: a decode row's bytes read per second over the better of two bandwidth probes taken just before and after its runs\n";
  if (none) out += std::string(kNoProbes) + "\n";
  return out.empty() ? out : "\n" + out;
}

}  // namespace

std::string format_table(const std::vector<Result>& results, const std::string& format) {
  std::string out;
  if (format == "json") {
    nlohmann::json j = {{"build", build_commit()}, {"cpu", cpu_model()}};
    // The first row's sgemm rate (scripts/bench_vs_torch.py reads it).
    for (const Result& r : results)
      if (r.rates.sgemm.probed()) {
        j["sgemm_gflops"] = r.rates.sgemm_gflops;
        break;
      }
    j["rows"] = nlohmann::json::array();
    for (const Result& r : results) j["rows"].push_back(result_json(r));
    return j.dump(2) + "\n";
  }
  if (format == "jsonl") {
    for (const Result& r : results) out += result_json(r).dump() + "\n";
    return out;
  }
  if (format == "csv") return format_csv(results);
  if (format != "md") throw InputError("-o: expected md, csv, json or jsonl, found '" + format + "'");
  out += "build " + std::string(build_commit()) + ", CPU " + cpu_model() + "\n\n";
  if (any_parallel(results)) return out + parallel_md(results);
  out += "| variant | backend | test | shape BxSxE/H[:Hkv] | depth | causal | threads | first ms | mean ± sd ms | "
         "tokens/s ± sd | GFLOP/s | % peak | peak MiB | KV cache: err max abs / rel L2 |\n";
  out += "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Result& r : results) {
    const Row& w = r.row;
    std::string head = "| " + w.variant + " | " + w.backend + " | " + w.test() + " | " + shape_text(w) + " | " +
                       std::to_string(w.depth) + " | " + ((w.causal || w.phase != Phase::Forward) ? "yes" : "no") +
                       " | " + std::to_string(r.threads) + " | ";
    if (!r.skipped.empty()) {
      out += head + "skipped: " + r.skipped + " |||||||\n";
      continue;
    }
    const Timing& t = r.timing;
    // % of the sgemm rate for forward/prefill rows, of the read bandwidth for
    // decode rows (suffix bw); rows that time their attention add the
    // attention's share of the FMA peak (suffix fma). Empty where not probed.
    std::string peak = w.phase == Phase::Generate ? (r.rates.read_gbs > 0 ? num(r.bandwidth_percent, "%.1f bw") : "")
                       : r.rates.sgemm.probed()   ? num(r.sgemm_percent, "%.1f")
                                                  : "";
    if (r.attention_ms >= 0 && w.phase != Phase::Generate && r.rates.fma.probed())
      peak += (peak.empty() ? "" : ", ") + num(r.fma_percent, "%.1f fma");
    out += head + num(t.first_ms, "%.3f") + " | " + num(t.mean_ms, "%.3f") + " ± " + num(t.stddev_ms, "%.3f") + " | " +
           num(r.tokens_per_s, "%.1f") + " ± " + num(r.tokens_per_s_sd, "%.1f") + " | " +
           num(t.gflops_cached(), "%.1f") + " | " + peak + " | " + num(r.peak_mib, r.peak_per_row ? "%.1f" : "%.1f*") +
           " | " + cache_cell(r) + " |\n";
  }
  out += probe_notes(results);
  // The decode tunables per thread count and format, where a row has them.
  std::map<std::string, std::string> tunings;
  for (const Result& r : results)
    if (r.skipped.empty() && !tuning_text(r).empty())
      tunings[std::to_string(r.threads) + " threads, " + cache_dtype_name(r.row.cache_dtype)] = tuning_text(r);
  for (const auto& [where, text] : tunings)
    out += (where == tunings.begin()->first ? "\n" : "") + std::string("decode tuning at ") + where + ": " + text + "\n";
  bool process_peak = false;
  for (const Result& r : results) process_peak |= r.skipped.empty() && !r.peak_per_row;
  if (process_peak) out += "\n* the peak could not be reset per row: the process's high-water mark\n";
  return out;
}

}  // namespace mha::bench
