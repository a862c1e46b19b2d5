#pragma once
// The rotary position embedding of Hugging Face's LlamaRotaryEmbedding and
// apply_rotary_pos_emb (Mistral and Qwen2 use the same code):
//   inv_freq[f] = 1 / theta^(2f / dh)            float32, f < dh/2
//   angle[p, f] = float32(position p) * inv_freq[f]  (float32 product)
//   cos/sin     = cos/sin(angle) rounded to float32, then used at the
//                 activation's precision (the float64 reference widens them)
//   x'[d]        = x[d] * cos[d] - x[d + dh/2] * sin[d]         d < dh/2
//   x'[d + dh/2] = x[d + dh/2] * cos[d] + x[d] * sin[d]
// (rotate_half: cat(-x2, x1), and cos/sin are cat(freqs, freqs), so both
// halves use the same angle.) The modules compute cos/sin with torch's
// float32 cos/sin, which are within one float32 ulp of the correctly
// rounded values computed here; docs/CONFIG.md says so.
#include <cstdint>
#include <vector>

#include "model/attention.h"

namespace mha {

// cos and sin of every (position row, token, frequency): [rows, L, dh/2],
// rows = the positions' batch dim (1 when positions are absent: 0..L-1).
struct RopeTable {
  int64_t rows = 0, L = 0, half = 0;
  std::vector<float> cos, sin;
  // Table row for token i of batch b (a batch-1 table serves every batch).
  const float* cos_at(int64_t b, int64_t i) const { return cos.data() + ((rows == 1 ? 0 : b) * L + i) * half; }
  const float* sin_at(int64_t b, int64_t i) const { return sin.data() + ((rows == 1 ? 0 : b) * L + i) * half; }
};

// inv_freq [dh/2] as the modules compute it in float32.
std::vector<float> rope_inv_freq(const RotaryEmbedding& rope, int64_t head_dim);

// The table for `in.positions` (or 0..L-1) of a spec with a rope; L is the
// query length.
RopeTable rope_table(const AttentionSpec& spec, const AttentionInputs& in);
// The table for positions first .. first + n - 1 (rows = 1, L = n): the rows
// a KV-cache session appends (backends/decode.h). Same values as rope_table
// gives those positions.
RopeTable rope_table_at(const AttentionSpec& spec, int64_t first, int64_t n);

// Rotates one head's row x[0 .. 2*half) in place (float or double).
template <class T>
void apply_rope(T* x, const float* cos, const float* sin, int64_t half) {
  for (int64_t d = 0; d < half; ++d) {
    const T x1 = x[d], x2 = x[d + half], c = static_cast<T>(cos[d]), s = static_cast<T>(sin[d]);
    x[d] = x1 * c - x2 * s;
    x[d + half] = x2 * c + x1 * s;
  }
}

// Rotates every head of rows [row0, row0 + n) of a projection laid out as
// [B*L rows, ld], heads of width 2*half at columns h*2*half; flattened row
// r is token r % L of batch r / L.
template <class T>
void apply_rope_rows(const RopeTable& t, T* x, int64_t ld, int64_t row0, int64_t n, int64_t heads) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t flat = row0 + r, b = flat / t.L, i = flat % t.L;
    for (int64_t h = 0; h < heads; ++h) apply_rope(x + r * ld + h * 2 * t.half, t.cos_at(b, i), t.sin_at(b, i), t.half);
  }
}

}  // namespace mha
