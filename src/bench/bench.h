#pragma once
// `mha bench` as a library: a row is one (variant, backend, batch, seq,
// hidden, heads, causal) shape; it is run once cold and `repetitions` times
// cached after `warmup` untimed runs, and reported against the machine's
// sgemm rate probed in the same process.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/runner.h"

namespace mha::bench {

struct Row {
  std::string variant = "torch_mha";
  std::string backend = "cpu";
  int64_t batch = 1, seq = 128, hidden = 256, heads = 4;
  int64_t kv_heads = 0;  // grouped-query variants (llama_attention); 0: as many as heads
  bool causal = false;
  nlohmann::ordered_json backend_options = nlohmann::ordered_json::object();
  // Caps on the run's warmup / repetitions for this row (-1: none), so a
  // seconds-long row (tt-sim at seed 002's shape) fits in the default suite.
  int64_t max_warmup = -1, max_repetitions = -1;
  std::string label() const;
};

struct Result {
  Row row;
  Timing timing;
  double sgemm_percent = 0;  // cached GFLOP/s over the probed sgemm GFLOP/s
  double peak_mib = 0;       // peak resident memory while the row ran
  std::string skipped;       // why the row could not run, else empty
};

// OpenBLAS sgemm GFLOP/s on an n x n x n product, best of a few runs, with
// the threads OpenBLAS would use for attention.
double probe_sgemm_gflops(int64_t n = 1024);

// The default suite: the seed 002 shape (8x384x1024, 16 heads) on cpu and on
// tt-sim (exact numerics, no warmup, two cached runs), 1x1024x768/12 causal,
// 1x4096x1024/16 causal, and the seeds' small shapes.
std::vector<Row> default_suite();
// Reads a suite file: a JSON array of row objects with the keys of Row.
std::vector<Row> load_suite(const std::string& path);
// The rows of a parsed suite; `path` prefixes errors.
std::vector<Row> parse_suite(const ordered_json& j, const std::string& path);

// Builds the variant's params for the row's shape, the weights (init torch),
// and the inputs (torch.rand, self-attention), then times it.
Result run_row(const Row& row, int64_t warmup, int64_t repetitions, double sgemm_gflops);

std::string format_table(const std::vector<Result>& results, const std::string& format, double sgemm_gflops);
nlohmann::json result_json(const Result& r);

}  // namespace mha::bench
