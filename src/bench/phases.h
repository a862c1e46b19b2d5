#pragma once
// The two llama-bench phases on a backend's KV-cache session
// (backends/decode.h): a prompt of P tokens after `depth` cached tokens
// (prefill, pp<P>) or N single-token steps after them (generate, tg<N>).
#include "backends/backend.h"
#include "bench/bench.h"

namespace mha::bench {

struct PhaseRun {
  Timing timing;               // per run: the prompt's append, or all N steps
  double bytes_per_token = 0;  // generate: weights + cache bytes read per step, mean over the steps
  // The session's own attention time (DecodeSession::attention_seconds) per
  // timed run, median, and its FLOPs per run; attention_ms < 0 where the
  // backend does not measure it.
  double attention_ms = -1;
  double attention_cpu_ms = -1;  // CPU ms of all threads, median
  double attention_flops = 0;
};

// x: [batch, seq, hidden], the prompt or the steps' inputs. Every run (one
// cold, `warmup` untimed, `repetitions` timed) starts a fresh session, fills
// `depth` positions untimed (DecodeSession::fill_synthetic), then times the
// phase. Weight bytes are counted as float32 (how the cpu backend holds them).
PhaseRun run_phase(const AttentionSpec& spec, const TensorMap& weights, Backend& backend, const Row& row,
                   const Tensor& x, int64_t warmup, int64_t repetitions);

// Tokens a generate row's cache error is measured over: the first steps of
// x after the row's depth (synthetic, seed 0), on a fresh session, against
// the float64 reference's decode of the same (run/decode_error.h). Two
// steps keep the reference's scalar float64 attention to about a second at
// depth 32768 on a Llama-3-8B layer.
constexpr int64_t kErrorTokens = 2;
DecodeError phase_error(const AttentionSpec& spec, Backend& backend, const Row& row, const Tensor& x);

// Multiply-adds x 2 of appending `rows` tokens per batch item to a causal
// session that holds `cached` tokens (keys seen per row: cached + i + 1,
// capped by the spec's window).
double append_flops(const AttentionSpec& spec, int64_t batch, int64_t cached, int64_t rows);
// The attention part of append_flops alone: 2 x batch x heads x (dh + dv)
// x the keys each row sees (no projections).
double append_attention_flops(const AttentionSpec& spec, int64_t batch, int64_t cached, int64_t rows);

}  // namespace mha::bench
