// `mha bench`: the default suite, comma-list sweeps or a suite file; a table
// (md, csv) or machine output (json, jsonl); progress on stderr.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "io/output_set.h"
#include "util/error.h"
#include "util/json_depth.h"
#include "util/text.h"

namespace mha::cli {

namespace {

struct BenchFlags {
  std::string variant, backend, batch, seq, hidden, heads, causal, suite, format = "md", output;
  int64_t repetitions = 5, warmup = 1;
  bool no_progress = false;
  std::vector<std::string> backend_options;  // KEY=VALUE
};

// "dtype=bfloat8_b" -> {"dtype": "bfloat8_b"}; values that parse as JSON (numbers,
// true, [8, 8]) keep their type.
ordered_json parse_backend_options(const std::vector<std::string>& items) {
  ordered_json o = ordered_json::object();
  for (const std::string& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("--backend-option: expected KEY=VALUE, found '" + printable(item) + "'");
    std::string value = item.substr(eq + 1);
    if (json_too_deep_at(value) != std::string::npos)
      throw InputError("--backend-option: value nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    ordered_json v = ordered_json::parse(value, nullptr, false);
    o[item.substr(0, eq)] = v.is_discarded() ? ordered_json(value) : v;
  }
  return o;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int64_t> int_list(const std::string& s, const char* flag, int64_t dflt) {
  if (s.empty()) return {dflt};
  std::vector<int64_t> out;
  for (const std::string& item : split(s)) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(std::string(flag) + ": expected a comma list of positive integers, found '" + item + "'");
    }
  }
  return out;
}

std::vector<bench::Row> sweep(const BenchFlags& f) {
  std::vector<std::string> variants = f.variant.empty() ? std::vector<std::string>{"torch_mha"} : split(f.variant);
  std::vector<std::string> backends = f.backend.empty() ? std::vector<std::string>{"cpu"} : split(f.backend);
  std::vector<bool> causal;
  for (const std::string& c : f.causal.empty() ? std::vector<std::string>{"0"} : split(f.causal)) {
    if (c == "1" || c == "true" || c == "yes") causal.push_back(true);
    else if (c == "0" || c == "false" || c == "no") causal.push_back(false);
    else throw InputError("--causal: expected a comma list of 0/1, found '" + c + "'");
  }
  std::vector<bench::Row> rows;
  for (const auto& v : variants)
    for (const auto& be : backends)
      for (int64_t b : int_list(f.batch, "--batch", 1))
        for (int64_t s : int_list(f.seq, "--seq", 512))
          for (int64_t h : int_list(f.hidden, "--hidden", 1024))
            for (int64_t n : int_list(f.heads, "--heads", 16))
              for (bool c : causal) {
                bench::Row r;
                r.variant = v, r.backend = be, r.batch = b, r.seq = s, r.hidden = h, r.heads = n, r.causal = c;
                r.backend_options = parse_backend_options(f.backend_options);
                if (h % n != 0) throw InputError("--hidden " + std::to_string(h) + " is not a multiple of --heads " +
                                                 std::to_string(n));
                rows.push_back(r);
              }
  return rows;
}

int bench_command(const BenchFlags& f) {
  bool swept = !(f.variant + f.backend + f.batch + f.seq + f.hidden + f.heads + f.causal).empty();
  std::vector<bench::Row> rows = !f.suite.empty() ? bench::load_suite(f.suite) : swept ? sweep(f) : bench::default_suite();
  if (!f.suite.empty() && swept) throw InputError("--suite: give either a suite file or sweep flags, not both");
  if (f.format != "md" && f.format != "csv" && f.format != "json" && f.format != "jsonl")
    throw InputError("-o: expected md, csv, json or jsonl, found '" + f.format + "'");
  io::OutputSet outs;
  if (!f.suite.empty()) outs.add_input(f.suite);
  if (!f.output.empty()) outs.add_file("--output", f.output);
  // jsonl rows are written and flushed as each finishes, so an interrupted
  // bench keeps them: the one output that is not all-or-nothing.
  const bool stream = f.format == "jsonl";
  std::FILE* sink = !stream ? nullptr : f.output.empty() ? stdout : outs.open_stream(f.output);
  const bool progress = !f.no_progress;
  const bool tty = isatty(fileno(stderr));
  if (progress) std::fprintf(stderr, "probing sgemm...\n");
  double sgemm = bench::probe_sgemm_gflops();
  std::vector<bench::Result> results;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (progress) {
      int done = static_cast<int>(20 * i / rows.size());
      std::fprintf(stderr, "%s[%s%s] %zu/%zu %s%s", tty ? "\r\033[K" : "", std::string(done, '#').c_str(),
                   std::string(20 - done, '.').c_str(), i + 1, rows.size(), rows[i].label().c_str(), tty ? "" : "\n");
      std::fflush(stderr);
    }
    results.push_back(bench::run_row(rows[i], f.warmup, f.repetitions, sgemm));
    if (sink) {
      const std::string line = bench::format_table({results.back()}, "jsonl", sgemm);
      std::fwrite(line.data(), 1, line.size(), sink);
      if (std::fflush(sink) != 0 || std::ferror(sink))
        throw InputError("--output " + (f.output.empty() ? std::string("-") : f.output) + ": cannot write: " +
                         std::strerror(errno));
    }
  }
  if (progress && tty) std::fprintf(stderr, "\r\033[K");
  if (stream) return 0;
  std::string text = bench::format_table(results, f.format, sgemm);
  if (f.output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    outs.stage_bytes(f.output, text);
    outs.commit();
  }
  return 0;
}

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<BenchFlags>();
  auto* sub = app.add_subcommand("bench", "Time variants and backends over shapes, against the machine's sgemm rate");
  sub->add_option("--variant", f->variant, "comma list of variants (default torch_mha)");
  sub->add_option("--backend", f->backend, "comma list of backends: reference, cpu, tt-sim (default cpu)");
  sub->add_option("--batch", f->batch, "comma list of batch sizes (default 1)");
  sub->add_option("--seq", f->seq, "comma list of sequence lengths (default 512)");
  sub->add_option("--hidden", f->hidden, "comma list of model widths (default 1024)");
  sub->add_option("--heads", f->heads, "comma list of head counts (default 16)");
  sub->add_option("--causal", f->causal, "comma list of 0/1 (default 0)");
  sub->add_option("--backend-option", f->backend_options,
                  "KEY=VALUE for the backend of swept rows, repeatable (tt-sim: dtype=bfloat8_b, threads=1)");
  sub->add_option("--suite", f->suite, "JSON array of rows {variant, backend, batch, seq, hidden, heads, kv_heads, causal}");
  sub->add_option("-r,--repetitions", f->repetitions, "timed cached runs per row (default 5)")->check(integer_at_least(1));
  sub->add_option("--warmup", f->warmup, "untimed runs after the first (default 1)")->check(integer_at_least(0));
  sub->add_option("-o,--format", f->format, "md, csv, json or jsonl (default md)");
  sub->add_option("--output", f->output, "write the table to this file instead of stdout");
  sub->add_flag("--no-progress", f->no_progress, "no progress bar on stderr");
  sub->callback([f, &exit_code]() { exit_code = bench_command(*f); });
}

}  // namespace mha::cli
