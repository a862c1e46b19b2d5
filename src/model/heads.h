#pragma once
// The one home of the head split every plain (non-flash) path does: a
// projection [B*rows, ld] with head h at columns h*d .. h*d + d becomes
// per-head rows [B, heads, rows_total, d], and key / value get their extra
// rows (model/attention.h): row `rows` is the bias row when there is one,
// the rest (add_zero_attn) are zeros. Grouped-query heads are not
// repeated here: query head h reads kv head h / (H / Hkv).
#include <cstdint>
#include <cstring>

namespace mha {

template <class T>
void split_heads(const T* src, int64_t ld, int64_t B, int64_t rows, int64_t rows_total, int64_t heads, int64_t d,
                 const T* bias, T* dst) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < rows_total; ++j) {
        T* out = dst + ((b * heads + h) * rows_total + j) * d;
        if (j < rows)
          std::memcpy(out, src + (b * rows + j) * ld + h * d, sizeof(T) * d);
        else if (j == rows && bias)
          std::memcpy(out, bias + h * d, sizeof(T) * d);
        else
          std::memset(out, 0, sizeof(T) * d);
      }
}

}  // namespace mha
