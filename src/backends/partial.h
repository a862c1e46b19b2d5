#pragma once
// Partial attention: the block a sequence-parallel (ring) run is built from
// (parallel/ring.h). A rank holds some query rows and, one after another,
// blocks of key/value rows at known token positions; it attends each block
// while carrying the online-softmax state of its queries, and normalises once
// every block has been seen. A backend that implements the primitive
// (Backend::supports(Capability::PartialAttention, spec) is nullopt) can take
// part in a ring; nothing in src/parallel/ knows which backend it is.
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace mha {

// What a caller may ask a backend for beyond run() (Backend::supports).
enum class Capability {
  OutputProjection,  // project_output: head-parallel's gathered context
  PartialAttention,  // project_rows, attend_partial, merge_partial: ring attention
  AttentionWeights,  // run() with RunOptions::need_weights
};
const char* capability_name(Capability c);

struct AttentionSpec;
// Why partial attention cannot serve the spec (its state carries neither
// the logit softcap nor the sinks), or nullopt: what every backend's
// supports(Capability::PartialAttention, spec) says first.
std::optional<std::string> partial_unsupported(const AttentionSpec& spec);

// The online-softmax state of queries [B, n] of H heads after some keys, in
// the backend's arithmetic dtype (Backend::arithmetic_dtype):
//   m   [B, n, H]      running max of the scores in base-2 units,
//                      s_j = scale * (q . k_j) * log2(e); -inf: no key seen yet
//   l   [B, n, H]      sum_j 2^(s_j - m)
//   acc [B, n, H*dv]   sum_j 2^(s_j - m) v_j, not normalised
// The context is acc / l (finish_state). Base 2 because that is the flash
// kernel's own unit: its state is stored and reloaded without rounding.
struct SoftmaxState {
  Tensor acc, m, l;
  static SoftmaxState empty(DType dt, int64_t B, int64_t n, int64_t H, int64_t dv);
  void reset();  // back to empty: no key seen
};

// Rows [row0, row0 + rows) of every batch of q [B, n, H*dh] and of a
// SoftmaxState over the same n rows, at token positions [pos0, pos0 + rows).
struct QueryBlock {
  int64_t row0 = 0, rows = 0, pos0 = 0;
};

// Keys k [B, rows, Hkv*dh] and values v [B, rows, Hkv*dv], each contiguous,
// in the backend's arithmetic dtype, at token positions [pos0, pos0 + rows).
struct KeyBlock {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t rows = 0, pos0 = 0;
};

// Into `into`, the keys `other` saw (the same queries, other keys): both are
// rescaled to the larger max and summed, as if one state had seen all keys.
void merge_states(SoftmaxState& into, const SoftmaxState& other);
// acc / l in place, the context [B, n, H*dv]; a row with l = 0 (every key it
// was shown masked) becomes NaN, as a one-process softmax over masked keys.
void normalise_state(SoftmaxState& s);

}  // namespace mha
