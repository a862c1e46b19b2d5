#pragma once
// How a ring run's input reaches the ranks and its output leaves them, so
// that no rank holds the whole input or output (parallel/ring.h).
//
// Input: when the config's one input is the self-attention tensor x
// [B, L, E] itself and the variant says it maps it unchanged to query, key
// and value and leaves the output as it is (Variant::self_attends_x), each rank gets only its own
// rows: `rand` / `randn` inputs are drawn by every rank from the seed (the
// same numbers as one process: TorchGenerator::rows), and a .npy file is
// read by row ranges on rank 0 (io::NpyRows), one rank's rows at a time, and
// sent. Anything else (npz / safetensors inputs, several inputs, a variant
// that transposes) is read whole by rank 0 as prepare_run does.
// Output: rank 0 takes each rank's rows as they arrive (OutputSink) and
// writes them into the output's temporary .npy at their place; it keeps the
// whole output only when something needs it (a configured reference, or an
// output of at most kWholeOutputElements for the JSON report's values), else
// only the rows a printed summary shows.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/tensor_file.h"
#include "run/runner.h"

namespace mha::parallel {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

// Largest output kept whole on rank 0 when nothing else needs it: the
// JSON report lists the values of outputs up to this size.
constexpr int64_t kWholeOutputElements = 100000;

// Where each rank's rows of x come from.
enum class RowSourceKind : int64_t { Sent = 0, Rand = 1, Randn = 2 };

struct RowSource {
  RowSourceKind kind = RowSourceKind::Sent;
  uint64_t seed = 0;   // Rand / Randn: inputs.seed
  Shape shape;         // [B, L, E] the whole x
  std::string npy;     // Sent: the .npy file rank 0 reads by rows
};

// Where a ring run's x comes from: rows per rank from `rows`, or (nullopt)
// whole in PreparedRun::inputs.
struct RingInput {
  std::optional<RowSource> rows;
};

// The inputs of a run from prepare_model (InputState::Pending), the ring's
// way: rows per rank when the run streams, and then run.inputs holds the
// variant's inputs for x's shape and dtype (the first min(L, 8) rows, or
// all L when x has at most 1M elements; zeros), on which the run's checks
// (shapes, dtype, backend support) are made; else whole, as prepare_inputs
// reads them. A run streams unless the variant does not declare
// Variant::self_attends_x, or the config's one input is not x as a
// rand/randn tensor or a float32/float64 .npy file. Errors name the config.
RingInput prepare_ring_input(PreparedRun& run);

// Rows `chunks` of x [B, L, E] -> [B, n, E] as `source` gives them
// (generated, or read from the .npy file), cast to `dt`.
Tensor source_rows(const RowSource& source, const Chunks& chunks, DType dt);

// Rank 0's end of the output [B, L, O]: put() takes one rank's rows
// [B, n, O] in its chunk order.
class OutputSink {
 public:
  // `file`: the output's temporary .npy, or "" for none.
  OutputSink(const Shape& shape, DType dtype, bool keep_whole, const std::string& file);
  void put(const uint8_t* rows, const Chunks& chunks);
  void close();  // every row is in: flushes the file
  const Tensor& whole() const { return whole_; }
  const OutputRows& edges() const { return edges_; }

 private:
  Shape shape_;
  bool keep_whole_;
  Tensor whole_;
  OutputRows edges_;
  std::optional<io::NpyRowWriter> file_;
};

}  // namespace mha::parallel
