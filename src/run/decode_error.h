#pragma once
// A KV cache format's error: a backend's decode output against the float64
// reference backend's decode of the same tokens with a float32 cache (which
// keeps every value exactly, backends/reference), over the same synthetic
// depth. What `mha run` decode reports and `mha bench` decode rows show.
#include <cstdint>
#include <optional>
#include <vector>

#include "backends/decode.h"

namespace mha {

struct DecodeError {
  double max_abs = 0;  // max |out - exact|
  double rel_l2 = 0;   // ||out - exact||_2 / ||exact||_2 (0 when exact is all zeros)
  int64_t rows = 0;    // token rows compared (per batch row)
};

// The reference decode of `appends` (each [batch, n_i, q_in], in order) after
// `depth` positions filled by fill_synthetic(depth, seed), its outputs
// concatenated along dim 1, against `out` [batch, sum n_i, out_dim]. Cost:
// the reference's float64 cache of depth + sum n_i positions and its scalar
// float64 attention over them for each appended row.
DecodeError decode_error_vs_float64(const AttentionSpec& spec, int64_t batch, int64_t depth, uint64_t seed,
                                    const std::vector<Tensor>& appends, const Tensor& out);

// The reference's bounds: at most kErrorMaxBytes of float64 cache and
// kErrorMaxFlops of float64 attention (about 8 s of its scalar loops), so that
// a long prompt or a deep cache costs no minutes: nullopt when `rows` tokens
// after `depth` fit, else why not ("float64 reference would hold 17.2 GB of
// cache (limit 4.3 GB)").
constexpr double kErrorMaxBytes = 4.0 * (1 << 30), kErrorMaxFlops = 8e9;
std::optional<std::string> decode_error_too_costly(const AttentionSpec& spec, int64_t batch, int64_t depth,
                                                   int64_t rows);

}  // namespace mha
