#pragma once
// The rotary position embedding as Hugging Face's decoder layers apply it
// (LlamaRotaryEmbedding with modeling_rope_utils.py's frequencies, and
// apply_rotary_pos_emb; read at transformers' main of 2025, the revision
// with yarn's `truncate`, commit ef46806 and later):
//   dim         = rotary_dim (head_dim unless partial_rotary_factor < 1)
//   inv_freq[f] = 1 / theta^(2f / dim)          float32, f < dim/2, then the
//                 rope_scaling's float32 steps (model/rope.cpp)
//   angle[p, f] = float32(position p) * inv_freq[f]  (float32 product)
//   cos/sin     = cos/sin(angle) rounded to float32, times attention_factor
//                 in float32 (yarn's mscale; 1 otherwise), then used at the
//                 activation's precision (the float64 reference widens them,
//                 as a float64 module's forced-float32 rotary embedding does)
//   x'[d]        = x[d] * cos[d] - x[d + h] * sin[d]         d < h = dim/2
//   x'[d + h]    = x[d + h] * cos[d] + x[d] * sin[d]
//   x[dim ..]    passed through (partial rotary: Phi-3, ...)
// (rotate_half: cat(-x2, x1), and cos/sin are cat(freqs, freqs), so both
// halves use the same angle.) Interleaved rope (DeepSeek's rope_interleave)
// rotates the pairs (2d, 2d + 1) instead: Hugging Face de-interleaves q and
// k to [evens | odds] and then rotates halves, which permutes q's and k's
// columns alike, so every q.k product, and so the attention, is the same.
// The modules compute cos/sin with torch's float32 pow/cos/sin, which are
// within one float32 ulp of the correctly rounded values computed here;
// docs/CONFIG.md says so.
#include <cstdint>
#include <vector>

#include "model/attention.h"

namespace mha {

// cos and sin of every (position row, token, frequency): [rows, L, half],
// rows = the positions' batch dim (1 when positions are absent: 0..L-1).
struct RopeTable {
  int64_t rows = 0, L = 0, half = 0;  // half = rotary_dim / 2
  int64_t head_dim = 0;               // stride between the heads of a row
  bool interleaved = false;           // pairs (2d, 2d + 1) instead of (d, d + half)
  std::vector<float> cos, sin;
  // Table row for token i of batch b (a batch-1 table serves every batch).
  const float* cos_at(int64_t b, int64_t i) const { return cos.data() + ((rows == 1 ? 0 : b) * L + i) * half; }
  const float* sin_at(int64_t b, int64_t i) const { return sin.data() + ((rows == 1 ? 0 : b) * L + i) * half; }
};

// The rotated width of a spec's heads: rotary_dim, or head_dim when 0.
int64_t rope_rotary_dim(const RotaryEmbedding& rope, int64_t head_dim);

// inv_freq [rotary_dim/2] as the modules compute it in float32, scaling included.
std::vector<float> rope_inv_freq(const RotaryEmbedding& rope, int64_t head_dim);

// The table for `in.positions` (or 0..L-1) of a spec with a rope; L is the
// query length.
RopeTable rope_table(const AttentionSpec& spec, const AttentionInputs& in);
// The table for positions first .. first + n - 1 (rows = 1, L = n): the rows
// a KV-cache session appends (backends/decode.h). Same values as rope_table
// gives those positions.
RopeTable rope_table_at(const AttentionSpec& spec, int64_t first, int64_t n);

// Rotates one head's row x in place (float or double): pairs (d, d + half),
// or (2d, 2d + 1) when interleaved; columns from 2*half on are left alone.
template <class T>
void apply_rope(T* x, const float* cos, const float* sin, int64_t half, bool interleaved = false) {
  const int64_t step = interleaved ? 1 : half;  // x2's offset from x1
  for (int64_t d = 0; d < half; ++d) {
    T* p1 = interleaved ? x + 2 * d : x + d;
    T* p2 = p1 + step;
    const T x1 = *p1, x2 = *p2, c = static_cast<T>(cos[d]), s = static_cast<T>(sin[d]);
    *p1 = x1 * c - x2 * s;
    *p2 = x2 * c + x1 * s;
  }
}

// Rotates every head of rows [row0, row0 + n) of a projection laid out as
// [B*L rows, ld], heads of width t.head_dim at columns h*head_dim;
// flattened row r is token r % L of batch r / L.
template <class T>
void apply_rope_rows(const RopeTable& t, T* x, int64_t ld, int64_t row0, int64_t n, int64_t heads) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t flat = row0 + r, b = flat / t.L, i = flat % t.L;
    for (int64_t h = 0; h < heads; ++h)
      apply_rope(x + r * ld + h * t.head_dim, t.cos_at(b, i), t.sin_at(b, i), t.half, t.interleaved);
  }
}

}  // namespace mha
