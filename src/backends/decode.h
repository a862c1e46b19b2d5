#pragma once
// Incremental (KV-cache) attention: the two phases Llama-style inference runs
// in. A session owns the K/V cache of one causal self-attention spec; each
// append() projects the new rows, rotates them (rope) at their positions,
// appends their keys and values to the cache and attends the new queries to
// everything cached so far (causal, windowed as the spec says):
//
//   append(x [B, n, q_in]) -> output [B, n, out_dim]   rows at positions
//                                                       length() .. length()+n-1
//
// A prompt of P tokens is one append of n = P (prefill); each generated token
// is one append of n = 1 (decode step). The outputs of a prefill of P and T
// steps, concatenated, equal one causal run over the P + T tokens (bitwise
// with a float32 cache on the reference backend; see docs for the cpu bound).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/attention.h"
#include "model/cache_dtype.h"

namespace mha {

struct DecodeOptions {
  CacheDtype cache_dtype = CacheDtype::Float32;
  int64_t batch = 1;
  // Tokens the session will hold at most (prompt + steps): a backend
  // allocates its cache once, up front, as a serving engine would.
  int64_t max_tokens = 0;
};

class DecodeSession {
 public:
  virtual ~DecodeSession() = default;
  // x: [batch, n, q_in], n >= 1, length() + n <= max_tokens (InputError otherwise).
  virtual Tensor append(const Tensor& x) = 0;
  // Tokens cached so far.
  virtual int64_t length() const = 0;
  // Bytes of K and V the session holds at its current length (what one
  // decode step reads besides the weights).
  virtual int64_t cache_bytes() const = 0;
  // The format the cache holds K and V in, as reports name it ("bfloat8_b"
  // on tt-sim); "" for the options' cache_dtype (the host backends).
  virtual std::string cache_format() const { return ""; }
  // Benchmarks only: the time this session's appends have spent in the
  // attention itself (after the projections and rope, before the output
  // projection), summed over its appends: wall seconds, and the CPU seconds
  // of all the process's threads meanwhile (on a shared machine the wall
  // time counts other tenants' slices, CPU time does not). < 0 where the
  // backend does not measure it. `mha bench` holds it against the FMA peak.
  struct AttentionTime {
    double wall_s = -1, cpu_s = -1;
  };
  virtual AttentionTime attention_time() const { return {}; }
  // Benchmarks only: appends n positions whose keys and values are
  // pseudo-random (uniform in [-1, 1), from `seed`) without projecting or
  // attending anything, so that a decode step can be timed at a context
  // depth of n without an n-token prefill first (llama-bench's -d). Later
  // appends continue at position length(). InputError past max_tokens.
  virtual void fill_synthetic(int64_t n, uint64_t seed) = 0;
};

// The specs a KV cache can serve, for every backend that decodes: causal
// self-attention (query, key and value projected from one input of one
// width) with no extra key rows (bias_k / add_zero_attn). nullopt when the
// spec fits, else one line saying what it lacks.
std::optional<std::string> decode_unsupported(const AttentionSpec& spec);
// Checks opt against spec (batch >= 1, max_tokens >= 1); InputError otherwise.
void check_decode_options(const AttentionSpec& spec, const DecodeOptions& opt);
// Checks one append's x [batch, n, q_in] against the session's state;
// InputError naming the expected and found shape otherwise.
void check_append(const AttentionSpec& spec, const DecodeOptions& opt, int64_t length, const Tensor& x);
// fill_synthetic's capacity check, and its values: element i of stream
// `seed` (a hash, so any thread can compute any element).
void check_fill(const DecodeOptions& opt, int64_t length, int64_t n);
inline float synthetic_value(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) * (2.0 / 16777216.0) - 1.0);
}

}  // namespace mha
