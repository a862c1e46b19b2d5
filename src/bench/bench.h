#pragma once
// `mha bench` as a library. A row is one shape on one backend, in one of
// three phases:
//   forward   one pass over `seq` tokens (the original suite rows);
//   prefill   llama-bench's pp<P>: a causal pass over P = `seq` prompt tokens,
//             after `depth` tokens were put in the KV cache (untimed);
//   generate  llama-bench's tg<N>: N = `seq` decode steps of one token each,
//             after `depth` cached tokens.
// A row runs once cold, `warmup` times untimed and `repetitions` times timed;
// prefill/generate rows start a fresh KV cache (and refill the depth) for
// every run, as llama-bench clears its cache between repetitions. Rows are
// held against the machine's sgemm rate (forward, prefill) or memory read
// bandwidth (generate) at the row's thread count (probes.h: the sgemm rate
// may come from an earlier run's probe; the bandwidth is the row's own).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "bench/probes.h"
#include "run/runner.h"

namespace mha::bench {

enum class Phase { Forward, Prefill, Generate };

// The most threads a row may ask for (the cpu backend's own limit).
constexpr int kMaxThreads = 1024;

struct Row {
  std::string variant = "torch_mha";
  std::string backend = "cpu";
  Phase phase = Phase::Forward;
  // seq: tokens per pass (forward), prompt tokens P (prefill), steps N (generate).
  int64_t batch = 1, seq = 128, hidden = 256, heads = 4;
  int64_t kv_heads = 0;  // grouped-query variants (llama_attention); 0: as many as heads
  int64_t depth = 0;     // prefill / generate: tokens cached before the timed part
  bool causal = false;   // prefill and generate rows are always causal
  int threads = 0;       // > 0: the backend's "threads" option; 0: the backend's default
  CacheDtype cache_dtype = CacheDtype::Float32;
  // Prefill rows at depth 0 run through the KV-cache session too (as every
  // row at depth > 0 does) instead of Backend::run, so that they report the
  // attention's own time (`mha bench --pp-session`).
  bool prefill_session = false;
  nlohmann::ordered_json backend_options = nlohmann::ordered_json::object();
  // `mha bench --hf DIR --layer N`: that layer's attention and weights
  // (variant llama_attention; hidden / heads / kv_heads are the layer's).
  std::string hf;
  int64_t hf_layer = 0;
  // Caps on the run's warmup / repetitions for this row (-1: none), so a
  // seconds-long row (tt-sim at seed 002's shape) fits in the default suite.
  int64_t max_warmup = -1, max_repetitions = -1;
  // "pp512", "tg128", or "fwd" for forward rows.
  std::string test() const;
  std::string label() const;
  // backend_options with "threads" set when the row asks for a count.
  nlohmann::ordered_json effective_backend_options() const;
};

// What a row of `mha bench --parallel heads|sequence` adds (bench_parallel.h):
// a one-process baseline row (mode empty, ranks 1, the sweep's threads x
// ranks threads) or a row across every MPI rank.
struct ParallelStats {
  std::optional<ParallelConfig::Mode> mode;  // nullopt: the one-process baseline
  int ranks = 1;
  int threads_per_rank = 0;
  // Parallel rows: 100 x the baseline's median / this row's median, the
  // baseline being one process with ranks x threads_per_rank threads.
  double efficiency_percent = 0;
  double baseline_median_ms = 0;
  int baseline_threads = 0;
  int64_t passes = 0;                        // first + warmup + timed passes the bytes cover
  std::vector<int64_t> bytes_sent_per_rank;  // bytes each rank sent during the row
  double peak_mib_max = 0;                   // the largest rank's peak (Result::peak_mib is rank 0's)
};

struct Result {
  Row row;
  Timing timing;            // per timed run: the whole pass / prompt / N steps
  double tokens_per_s = 0;  // batch x tokens per run / run time, mean over timed runs
  double tokens_per_s_sd = 0;
  double sgemm_percent = 0;      // forward / prefill: cached GFLOP/s over the probed sgemm rate
  double bandwidth_percent = 0;  // generate: bytes read per token / time per token over the probed bandwidth
  double bytes_per_token = 0;    // generate: weights + KV cache read per decode step (mean over the steps)
  // Rows run on a KV session that times its attention (DecodeSession::
  // attention_seconds): the median per run, its GFLOP/s (attention FLOPs
  // only) and that over the probed FMA peak; attention_ms < 0 otherwise.
  double attention_ms = -1;
  double attention_gflops = 0;
  double fma_percent = 0;
  // The same in CPU time: attention FLOPs per CPU-second of its threads
  // over the FMA loop's FLOPs per CPU-second of one thread. Both percents
  // are of the AVX2 loop's peak when the backend's describe() says its
  // attention ran AVX2 ("attention_isa"), else of the widest ISA's.
  double attention_cpu_ms = -1;
  double fma_cpu_percent = 0;
  MachineRates rates;            // at this row's thread count; each probe's stamp says when it ran
  ProbeMode probes = ProbeMode::Fresh;  // the run's --probes
  // Generate rows: the read bandwidth probed just before and just after the
  // timed runs; rates.read_gbs is the larger, so bandwidth_percent is held
  // to the better of the two (the host's bandwidth drifts within a process).
  double read_gbs_before = 0, read_gbs_after = 0;
  int threads = 0;               // as the backend ran (its describe(), else the row's, else the hardware's)
  std::string simd;              // the backend's instruction-set path (describe()["simd"])
  // Session rows: the tunables the backend's decode kernel ran with, as its
  // describe()["decode_tuning"]["last"] says (cpu: cpu_decode_tuning.h); null otherwise.
  nlohmann::json decode_tuning;
  double peak_mib = 0;           // peak resident memory while the row ran
  bool peak_per_row = true;      // false: the reset was refused; peak_mib is the process's high-water mark
  std::string timestamp;         // UTC ISO 8601, when the row started
  std::string skipped;           // why the row could not run, else empty
  // generate rows: the cache format's error (bench/phases.h phase_error);
  // none on the reference backend with a float32 cache (the oracle itself)
  std::optional<DecodeError> cache_error;
  std::optional<ParallelStats> parallel;  // rows of a --parallel sweep
};

// The default suite: the seed 002 shape (8x384x1024, 16 heads) on cpu and on
// tt-sim (exact numerics, no warmup, two cached runs), 1x1024x768/12 causal,
// 1x4096x1024/16 causal, and the seeds' small shapes.
std::vector<Row> default_suite();
// Refuses (InputError naming the row's sizes and bytes) a row whose tensors
// overflow 64-bit sizes or exceed the machine's physical memory, before any
// row runs.
void check_row_size(const Row& row);
// Reads a suite file: a JSON array of row objects with the keys of Row
// ("test": "pp512" / "tg128" for the phases; "depth", "threads", "cache_dtype").
std::vector<Row> load_suite(const std::string& path);
// The rows of a parsed suite; `path` prefixes errors.
std::vector<Row> parse_suite(const ordered_json& j, const std::string& path);
// "pp512" -> Prefill 512, "tg128" -> Generate 128, "fwd" -> Forward; `where` prefixes errors.
void parse_test(const std::string& test, Row& row, const std::string& where);

// How run_row makes a row's backend (tests substitute their own).
using BackendFactory = std::function<std::unique_ptr<Backend>(const Row& row, const nlohmann::ordered_json& options)>;
BackendFactory default_backend_factory();

// Makes each distinct backend (name and options) the rows name and looks up
// each row's variant, so that a bad backend option or variant is refused
// (InputError) before any probe or row runs.
void check_rows(const std::vector<Row>& rows, const BackendFactory& make = default_backend_factory());

// Builds the variant's params for the row's shape, the weights (init torch),
// and the inputs (torch.rand, self-attention), then times it.
Result run_row(const Row& row, int64_t warmup, int64_t repetitions, RateCache& rates,
               const BackendFactory& make_backend = default_backend_factory());

// The variant, init-torch weights and torch.rand inputs of a forward row, as
// run_row times them; "" or why the variant cannot take the row's shape.
std::string prepare_forward(const Row& row, PreparedRun& run);

// res.tokens_per_s(_sd): mean and sample standard deviation over the timed runs.
void tokens_per_second(Result& res, double tokens_per_run);

// md, csv, json or jsonl. The md notes and each machine-readable row say
// which probes the rows were held against and when they were taken.
std::string format_table(const std::vector<Result>& results, const std::string& format);
nlohmann::json result_json(const Result& r);

}  // namespace mha::bench
