#pragma once
// The one home of the head split every plain (non-flash) path does
// (reference, cpu plain path, tt-sim pipeline): a projection
// [B, rows, ld] (batch b at src + b * batch_stride) with head g at columns
// g*d .. g*d + d becomes per-head rows [B, heads, rows_total, d], and key /
// value get their extra rows (model/attention.h): row `rows` is the bias
// row when there is one, the rest (add_zero_attn) are zeros.
// Grouped-query heads: output head h reads source head h / group. The host
// backends keep group = 1 (one output head per kv head; query head h reads
// kv head h / (H / Hkv) later); tt-sim repeats kv heads as repeat_kv does,
// so its batched matmuls see H heads.
#include <cstdint>
#include <cstring>

namespace mha {

template <class T>
void split_heads(const T* src, int64_t batch_stride, int64_t ld, int64_t B, int64_t rows, int64_t rows_total,
                 int64_t heads, int64_t group, int64_t d, const T* bias, T* dst) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      for (int64_t j = 0; j < rows_total; ++j) {
        T* out = dst + ((b * heads + h) * rows_total + j) * d;
        if (j < rows)
          std::memcpy(out, src + b * batch_stride + j * ld + g * d, sizeof(T) * d);
        else if (j == rows && bias)
          std::memcpy(out, bias + g * d, sizeof(T) * d);
        else
          std::memset(out, 0, sizeof(T) * d);
      }
    }
}

// Densely packed batches (batch stride rows * ld), no head repeat.
template <class T>
void split_heads(const T* src, int64_t ld, int64_t B, int64_t rows, int64_t rows_total, int64_t heads, int64_t d,
                 const T* bias, T* dst) {
  split_heads(src, rows * ld, ld, B, rows, rows_total, heads, 1, d, bias, dst);
}

}  // namespace mha
