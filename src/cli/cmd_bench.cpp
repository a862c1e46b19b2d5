// `mha bench`: the default suite, comma-list sweeps or a suite file; a table
// (md, csv) or machine output (json, jsonl); progress on stderr.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "bench/bench.h"
#include "bench/bench_parallel.h"
#include "backends/registry.h"
#include "cli/commands.h"
#include "cli/key_values.h"
#include "cli/validators.h"
#include "config/hf_config.h"
#include "io/output_set.h"
#include "parallel/world.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::cli {

namespace {

struct BenchFlags {
  std::string variant, backend, batch, seq, hidden, heads, kv_heads, causal, suite, format = "md", output;
  std::string hf;  // --hf DIR: rows of one layer of a Hugging Face folder
  int64_t layer = 0;
  // llama-bench's flags: prompt sizes, generated tokens, depths, threads.
  std::string n_prompt, n_gen, n_depth, threads, kv_cache;
  std::string parallel;  // heads or sequence: each row across the MPI ranks, after a one-process baseline
  int64_t repetitions = 5, warmup = 1;
  int64_t probe_mib = 0;  // read-bandwidth probe buffer; 0: max(256 MiB, 8x the last-level cache)
  std::string probes = "cached";  // bench::ProbeMode
  std::vector<std::string> empty_values;  // flags given as "" (refused: an empty list is not the default)
  bool no_progress = false;
  bool pp_session = false;  // pp rows at depth 0 through the KV session (bench::Row::prefill_session)
  std::vector<std::string> backend_options;  // KEY=VALUE
};

// "a,b" -> {"a", "b"}; an empty item ("1,,2", "8,") is kept so that it is
// reported, not silently dropped.
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// A comma list of integers >= `lo` (dflt when the flag was not given).
std::vector<int64_t> int_list(const std::string& s, const char* flag, std::vector<int64_t> dflt, int64_t lo = 1) {
  if (s.empty()) return dflt;
  std::vector<int64_t> out;
  const std::string what = lo == 0 ? "non-negative" : "positive";
  for (const std::string& item : split(s)) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < lo || v > (int64_t{1} << 40)) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(std::string(flag) + ": expected a comma list of " + what + " integers, found '" +
                       printable(item) + "' in '" + printable(s) + "'");
    }
  }
  return out;
}

std::vector<std::string> name_list(const std::string& s, const char* flag, const char* dflt) {
  if (s.empty()) return {dflt};
  std::vector<std::string> out = split(s);
  for (const std::string& item : out)
    if (item.empty()) throw InputError(std::string(flag) + ": empty item in '" + printable(s) + "'");
  return out;
}

// Forward rows (--seq x --causal) or, when -p, -n or -d is given,
// --hf: the folder's layer sets the variant and the shape.
void hf_shape(const BenchFlags& f, std::vector<std::string>& variants, std::vector<int64_t>& hiddens,
              std::vector<int64_t>& heads, std::vector<int64_t>& kv_heads) {
  if (!(f.variant + f.hidden + f.heads + f.kv_heads).empty())
    throw InputError("--hf: the folder's layer sets the variant and shape; drop --variant/--hidden/--heads/--kv-heads");
  const HfLayerAttention a = parse_hf_attention(hf_layer_params(open_hf_model(f.hf), f.layer));
  variants = {hf_variant_name(a)}, hiddens = {a.hidden}, heads = {a.heads}, kv_heads = {a.kv_heads};
}

// llama-bench rows: pp<P> for each prompt size and tg<N> for each
// generated-token count, at each depth (0 in -p / -n drops that kind, as in
// llama-bench). The model shape comes from the same flags either way.
std::vector<bench::Row> sweep(const BenchFlags& f) {
  const bool llama = !(f.n_prompt + f.n_gen + f.n_depth).empty();
  if (llama && !f.seq.empty()) throw InputError("--seq: not used with -p/-n/-d (the prompt size is -p)");
  if (llama && !f.causal.empty()) throw InputError("--causal: not used with -p/-n/-d (prefill and decode are causal)");
  if (!llama && !f.kv_cache.empty()) throw InputError("--kv-cache: only for -p/-n/-d rows");
  if (!llama && f.pp_session) throw InputError("--pp-session: only for -p/-n/-d rows");
  std::vector<std::string> variants = name_list(f.variant, "--variant", llama ? "llama_attention" : "torch_mha");
  std::vector<std::string> backends = name_list(f.backend, "--backend", "cpu");
  std::vector<bool> causal;
  for (const std::string& c : name_list(f.causal, "--causal", "0")) {
    if (c == "1" || c == "true" || c == "yes") causal.push_back(true);
    else if (c == "0" || c == "false" || c == "no") causal.push_back(false);
    else throw InputError("--causal: expected a comma list of 0/1, found '" + printable(c) + "'");
  }
  std::vector<CacheDtype> caches;
  for (const std::string& c : name_list(f.kv_cache, "--kv-cache", "float32")) {
    const std::optional<CacheDtype> t = cache_dtype_from_name(c);
    if (!t)
      throw InputError("--kv-cache: expected a comma list of " + cache_dtype_names() + ", found '" + printable(c) + "'");
    caches.push_back(*t);
  }
  // What each row times: (phase, tokens) pairs.
  std::vector<std::pair<bench::Phase, int64_t>> tests;
  if (llama) {
    for (int64_t p : int_list(f.n_prompt, "-p/--n-prompt", {512}, 0))
      if (p > 0) tests.push_back({bench::Phase::Prefill, p});
    for (int64_t n : int_list(f.n_gen, "-n/--n-gen", {128}, 0))
      if (n > 0) tests.push_back({bench::Phase::Generate, n});
    if (tests.empty()) throw InputError("-p/-n: every size is 0, nothing to run");
  } else {
    for (int64_t s : int_list(f.seq, "--seq", {512})) tests.push_back({bench::Phase::Forward, s});
  }
  const std::vector<int64_t> depths = int_list(f.n_depth, "-d/--n-depth", {0}, 0);
  for (int64_t d : depths)  // the config's decode.depth bound
    if (d > kMaxDecodeDepth)
      throw InputError("-d/--n-depth: expected at most " + std::to_string(kMaxDecodeDepth) + " positions, found " +
                       std::to_string(d));
  const std::vector<int64_t> threads = int_list(f.threads, "-t/--threads", {0});
  for (int64_t t : threads)
    if (t > bench::kMaxThreads)
      throw InputError("-t/--threads: expected at most " + std::to_string(bench::kMaxThreads) + " threads, found " +
                       std::to_string(t));
  std::vector<int64_t> kv_heads = int_list(f.kv_heads, "--kv-heads", {0});
  std::vector<int64_t> hiddens = int_list(f.hidden, "--hidden", {1024}), heads = int_list(f.heads, "--heads", {16});
  if (!f.hf.empty()) hf_shape(f, variants, hiddens, heads, kv_heads);
  const ordered_json options = parse_key_values(f.backend_options, "--backend-option");
  std::vector<bench::Row> rows;
  for (const auto& v : variants)
    for (const auto& be : backends)
      for (int64_t b : int_list(f.batch, "--batch", {1}))
        for (int64_t h : hiddens)
          for (int64_t n : heads)
            for (int64_t kv : kv_heads) {
              if (h % n != 0 && f.hf.empty())
                throw InputError("--hidden " + std::to_string(h) + " is not a multiple of --heads " + std::to_string(n));
              if (kv > 0 && n % kv != 0)
                throw InputError("--heads " + std::to_string(n) + " is not a multiple of --kv-heads " + std::to_string(kv));
              for (int64_t t : threads)
                for (const auto& [phase, tokens] : tests)
                  for (int64_t d : phase == bench::Phase::Forward ? std::vector<int64_t>{0} : depths)
                    for (bool c : phase == bench::Phase::Forward ? causal : std::vector<bool>{true})
                      for (CacheDtype cache : phase == bench::Phase::Forward ? std::vector<CacheDtype>{CacheDtype::Float32}
                                                                            : caches) {
                        bench::Row r;
                        r.variant = v, r.backend = be, r.batch = b, r.hidden = h, r.heads = n, r.kv_heads = kv;
                        r.phase = phase, r.seq = tokens, r.depth = d, r.causal = c;
                        r.threads = static_cast<int>(t);
                        r.cache_dtype = cache;
                        r.prefill_session = f.pp_session;
                        r.backend_options = options;
                        r.hf = f.hf, r.hf_layer = f.layer;
                        rows.push_back(r);
                      }
            }
  return rows;
}

// --parallel: which split, or none. Every rank reaches the same answer from
// the same flags, so a refusal here needs no agreement between ranks.
std::optional<ParallelConfig::Mode> parallel_mode(const BenchFlags& f) {
  const int n = parallel::size();
  if (f.parallel.empty()) {
    if (n > 1)
      throw InputError("mha bench runs on " + std::to_string(n) +
                       " MPI ranks: give --parallel heads or --parallel sequence to split each row across them");
    return std::nullopt;
  }
  ParallelConfig::Mode mode;
  if (f.parallel == "heads") mode = ParallelConfig::Mode::Heads;
  else if (f.parallel == "sequence") mode = ParallelConfig::Mode::Sequence;
  else throw InputError("--parallel: expected heads or sequence, found '" + printable(f.parallel) + "'");
  if (!(f.n_prompt + f.n_gen + f.n_depth + f.kv_cache).empty())
    throw InputError("--parallel: only forward rows (--seq, --causal) run across ranks; drop -p/-n/-d/--kv-cache");
  if (!f.suite.empty()) throw InputError("--parallel: takes the sweep flags (--seq, --heads, -t ...), not --suite");
  return mode;
}

int bench_command(const BenchFlags& f) {
  const std::optional<ParallelConfig::Mode> mode = parallel_mode(f);
  if (mode && parallel::rank() != 0) return bench::serve_bench();
  bench::RankCommands ranks;  // from here a failure on rank 0 stops the others
  if (!f.empty_values.empty()) throw InputError(f.empty_values.front() + ": expected a value, found ''");
  if (f.probe_mib > 65536) throw InputError("--probe-mib: expected at most 65536, found " + std::to_string(f.probe_mib));
  const std::optional<bench::ProbeMode> probes = bench::probe_mode_from_name(f.probes);
  if (!probes) throw InputError("--probes: expected none, cached or fresh, found '" + printable(f.probes) + "'");
  // --backend-option alone sweeps too (its options are for swept rows): it
  // was ignored by the default suite, which hid a bad option.
  bool swept = !(f.hf + f.variant + f.backend + f.batch + f.seq + f.hidden + f.heads + f.kv_heads + f.causal + f.n_prompt +
                  f.n_gen + f.n_depth + f.threads + f.kv_cache)
                    .empty() ||
               !f.backend_options.empty();
  // --parallel sweeps one thread per rank unless -t says otherwise, and its
  // default row is the sweep's (the default suite's small shapes split badly).
  BenchFlags g = f;
  if (mode && g.threads.empty()) g.threads = "1";
  std::vector<bench::Row> rows = !f.suite.empty() ? bench::load_suite(f.suite)
                                 : swept || mode  ? sweep(g)
                                                  : bench::default_suite();
  if (!f.suite.empty() && swept) throw InputError("--suite: give either a suite file or sweep flags, not both");
  for (const bench::Row& r : rows) bench::check_row_size(r);
  if (f.format != "md" && f.format != "csv" && f.format != "json" && f.format != "jsonl")
    throw InputError("-o: expected md, csv, json or jsonl, found '" + f.format + "'");
  bench::check_rows(rows);  // every backend option and variant, before any probe
  io::OutputSet outs;
  if (!f.suite.empty()) outs.add_input(f.suite);
  if (!f.output.empty()) outs.add_file("--output", f.output);
  // jsonl rows are written and flushed as each finishes, so an interrupted
  // bench keeps them: the one output that is not all-or-nothing.
  const bool stream = f.format == "jsonl";
  std::FILE* sink = !stream ? nullptr : f.output.empty() ? stdout : outs.open_stream(f.output);
  const bool progress = !f.no_progress;
  const bool tty = isatty(fileno(stderr));
  // Probed (or read from the cache store) as the rows need them.
  bench::RateCache rates(f.probe_mib << 20, *probes);
  std::vector<bench::Result> results;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (progress) {
      int done = static_cast<int>(20 * i / rows.size());
      std::fprintf(stderr, "%s[%s%s] %zu/%zu %s%s", tty ? "\r\033[K" : "", std::string(done, '#').c_str(),
                   std::string(20 - done, '.').c_str(), i + 1, rows.size(), rows[i].label().c_str(), tty ? "" : "\n");
      std::fflush(stderr);
    }
    std::vector<bench::Result> done;
    if (mode) done = bench::run_parallel_row(rows[i], *mode, f.warmup, f.repetitions, rates, ranks);
    else done.push_back(bench::run_row(rows[i], f.warmup, f.repetitions, rates));
    results.insert(results.end(), done.begin(), done.end());
    if (sink) {
      const std::string line = bench::format_table(done, "jsonl");
      std::fwrite(line.data(), 1, line.size(), sink);
      if (std::fflush(sink) != 0 || std::ferror(sink))
        throw InputError("--output " + (f.output.empty() ? std::string("-") : f.output) + ": cannot write: " +
                         std::strerror(errno));
    }
  }
  if (progress && tty) std::fprintf(stderr, "\r\033[K");
  if (stream) {
    ranks.finish();
    return 0;
  }
  std::string text = bench::format_table(results, f.format);
  if (f.output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    outs.stage_bytes(f.output, text);
    outs.commit();
  }
  ranks.finish();
  return 0;
}

}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<BenchFlags>();
  auto* sub = app.add_subcommand("bench", "Time variants and backends over shapes (llama-bench style with -p/-n/-d/-t), against the machine's sgemm rate and memory bandwidth");
  sub->add_option("--variant", f->variant, "comma list of variants (default torch_mha)");
  sub->add_option("--hf", f->hf, "time one layer of a Hugging Face model folder (its shape and weights)");
  sub->add_option("--layer", f->layer, "--hf: the decoder layer (default 0)")->check(integer_at_least(0));
  sub->add_option("--backend", f->backend, "comma list of backends (default cpu): " + backend_help());
  sub->add_option("--batch", f->batch, "comma list of batch sizes (default 1)");
  sub->add_option("--seq", f->seq, "comma list of sequence lengths (default 512)");
  sub->add_option("--hidden", f->hidden, "comma list of model widths (default 1024)");
  sub->add_option("--heads", f->heads, "comma list of head counts (default 16)");
  sub->add_option("--kv-heads", f->kv_heads, "comma list of key/value head counts (grouped-query variants; default: --heads)");
  sub->add_option("--causal", f->causal, "comma list of 0/1 (default 0)");
  sub->add_option("-p,--n-prompt", f->n_prompt,
                  "comma list of prompt sizes: a pp<P> row each (default 512 when -n or -d is given; 0: none)");
  sub->add_option("-n,--n-gen", f->n_gen,
                  "comma list of generated tokens: a tg<N> row each (default 128 when -p or -d is given; 0: none)");
  sub->add_option("-d,--n-depth", f->n_depth, "comma list of depths: tokens in the KV cache before each row (default 0)");
  sub->add_option("-t,--threads", f->threads, "comma list of thread counts (the backend's threads option; default: its own)");
  sub->add_option("--kv-cache", f->kv_cache, "KV cache dtypes of -p/-n rows, a comma list swept like -t: float32 (default), float16, bfloat16, q8_0, q4_0, bfloat8_b, bfloat4_b");
  sub->add_option("--backend-option", f->backend_options,
                  "KEY=VALUE for the backend of swept rows, repeatable (tt-sim: dtype=bfloat8_b, threads=1)");
  sub->add_option("--suite", f->suite, "JSON array of rows {variant, backend, test (pp512, tg128), batch, seq, hidden, heads, kv_heads, depth, "
                  "causal, threads, cache_dtype, backend_options}");
  sub->add_option("-r,--repetitions", f->repetitions, "timed cached runs per row (default 5)")->check(integer_at_least(1));
  sub->add_option("--warmup", f->warmup, "untimed runs after the first (default 1)")->check(integer_at_least(0));
  sub->add_option("-o,--format", f->format, "md, csv, json or jsonl (default md)");
  sub->add_option("--output", f->output, "write the table to this file instead of stdout");
  sub->add_option("--probe-mib", f->probe_mib,
                  "buffer of the read-bandwidth probe in MiB, 1 to 65536 (default: 256 or 4x the last-level cache, the larger)")
      ->check(integer_at_least(1));
  sub->add_option("--parallel", f->parallel,
                  "under mpirun: heads or sequence; each row runs on rank 0 alone with ranks x threads threads, "
                  "then split across the ranks with -t threads each (default -t 1)");
  sub->add_option("--probes", f->probes,
                  "none, cached (default) or fresh: the sgemm and FMA probes the rows' % of peak are held to; cached "
                  "reuses the last probe of this CPU, thread count and build from the user's cache folder "
                  "($MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha or ~/.cache/mha), probing and storing when there is none; "
                  "none leaves the % columns empty (decode rows then skip their bandwidth probes too)");
  sub->add_flag("--no-progress", f->no_progress, "no progress bar on stderr");
  sub->add_flag("--pp-session", f->pp_session,
                "pp rows at depth 0 also run through the KV-cache session (as at depth > 0), so they report the "
                "attention's own time and % of the FMA peak");
  sub->callback([f, sub, &exit_code]() {
    // CLI11 stores --kv-cache "" as "", which reads as "not given": note it so it is refused.
    f->empty_values.clear();
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0 && o->get_type_size() != 0)
        for (const std::string& v : o->results())
          if (v.empty()) f->empty_values.push_back(o->get_name());
    exit_code = bench_command(*f);
  });
}

}  // namespace mha::cli
