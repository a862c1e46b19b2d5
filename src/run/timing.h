#pragma once
// A run's timings: the first pass, and the timed passes' statistics.
#include <vector>

#include <nlohmann/json.hpp>

namespace mha {

struct Timing {
  double first_ms = 0;
  std::vector<double> cached_ms;
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0, stddev_ms = 0;
  double flops = 0;  // per forward pass
  double gflops_cached() const { return median_ms > 0 ? flops / (median_ms * 1e6) : 0; }
  double gflops_first() const { return first_ms > 0 ? flops / (first_ms * 1e6) : 0; }
};

// Summary statistics of cached_ms.
void summarize_timing(Timing& t);
nlohmann::json timing_json(const Timing& t);

}  // namespace mha
