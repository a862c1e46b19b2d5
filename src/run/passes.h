#pragma once
// The one timing loop every run uses (mha run, mha bench, head-parallel and
// ring runs): pass 0 is the first (cold: a backend builds its plan), then
// `warmup` untimed passes, then `iterations` timed ones. With no timed pass
// (iterations 0: runs of minutes) no warm-up runs either: nothing would be
// timed after it.
#include <chrono>
#include <cstdint>

#include "run/timing.h"

namespace mha {

inline int64_t pass_count(int64_t warmup, int64_t iterations) {
  return 1 + (iterations > 0 ? warmup : 0) + iterations;
}

struct Pass {
  int64_t index = 0;
  bool first = false;  // timed as Timing::first_ms
  bool timed = false;  // one of Timing::cached_ms
  bool last = false;
};

// Calls before(p) untimed, then pass(p) timed, for every pass; fills
// `t`'s first_ms and cached_ms and summarises them.
template <class PassFn, class BeforeFn>
void time_passes(Timing& t, int64_t warmup, int64_t iterations, PassFn&& pass, BeforeFn&& before) {
  using clock = std::chrono::steady_clock;
  const int64_t passes = pass_count(warmup, iterations);
  for (int64_t i = 0; i < passes; ++i) {
    const Pass p{i, i == 0, i > 0 && i >= passes - iterations, i + 1 == passes};
    before(p);
    const auto t0 = clock::now();
    pass(p);
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (p.first) t.first_ms = ms;
    else if (p.timed) t.cached_ms.push_back(ms);
  }
  summarize_timing(t);
}

template <class PassFn>
void time_passes(Timing& t, int64_t warmup, int64_t iterations, PassFn&& pass) {
  time_passes(t, warmup, iterations, pass, [](const Pass&) {});
}

}  // namespace mha
