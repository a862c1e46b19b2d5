#pragma once
// The one home of the causal / sliding-window rule (model/attention.h):
// key j is visible to query i iff (not causal or j <= i) and (no window or
// i - window < j). Mistral's sliding window (Hugging Face masking_utils:
// kv_idx > q_idx - sliding_window, on top of the causal mask) is the same
// rule: a query sees its own key and the window - 1 keys before it.
#include <algorithm>
#include <cstdint>

#include "model/attention.h"

namespace mha {

struct MaskRule {
  bool causal = false;
  int64_t window = 0;  // 0: unlimited

  MaskRule() = default;
  explicit MaskRule(const AttentionSpec& s) : causal(s.causal), window(s.window) {}
  bool visible(int64_t i, int64_t j) const { return (!causal || j <= i) && (window <= 0 || j > i - window); }
  // First key any of queries [i0, i1) can see, and one past the last
  // (clamped to [0, keys]): blocks outside it are skipped whole.
  int64_t first_key(int64_t i0) const { return window > 0 ? std::max<int64_t>(0, i0 - window + 1) : 0; }
  int64_t end_key(int64_t i1, int64_t keys) const { return causal ? std::min(keys, i1) : keys; }
  // Query lanes [i0 + lo, i0 + hi) that see key j: lo from causality, hi
  // from the window (each unclamped; the caller clamps to its lanes).
  int64_t first_query(int64_t j) const { return causal ? j : INT64_MIN / 2; }
  int64_t end_query(int64_t j) const { return window > 0 ? j + window : INT64_MAX / 2; }
};

}  // namespace mha
