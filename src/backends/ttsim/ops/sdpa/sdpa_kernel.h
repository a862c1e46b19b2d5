#pragma once
// ttnn.transformer.scaled_dot_product_attention (prefill) as tt-metal's SDPA
// compute kernel computes it (docs/TTSIM.md, "SDPA"): FlashAttention-2 over
// chunks of Q (q_chunk_size rows) and K (k_chunk_size keys), every
// intermediate in its circular buffer's format (bfloat16), the steps of
// sdpa_common.h in the kernel's order.
#include <optional>
#include <vector>

#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"
#include "util/fields.h"

namespace mha::ttsim {

struct SdpaConfig {
  // SDPAProgramConfig: chunk sizes in rows / keys, multiples of 32 that
  // divide the sequence length; exp_approx_mode picks the exp of the
  // rescale factor exp(m_old - m_new) (the chunk's exps are always approx).
  int64_t q_chunk_size = 32, k_chunk_size = 32;
  bool exp_approx_mode = true;
  bool is_causal = true;
  std::optional<float> scale;  // unset: 1/sqrt(dh) in float32
  // sliding_window_size (0: none), as tt-metal's later SDPA defines it: a
  // causal query at q sees keys [q - W + 1, q], a non-causal one
  // [q - W/2, q + W/2]. The 2024 kernel adds the window mask to every
  // visited chunk (it skips no chunk for the window); at latest see
  // sdpa_window.h (the streaming kernel skips the chunks outside it).
  int64_t sliding_window_size = 0;
  // attention_sink: one logit per query head (empty: none), in the units of
  // the unscaled scores, as bf16 values. After the last key chunk it enters
  // the running max and sum as one more key with no value (docs/TTSIM.md).
  std::vector<float> attention_sink;
  // The compute kernel config (fidelity of every FPU step, Dst mode, the
  // reciprocal's approx mode) and the output's dtype and packing. TT-NN's
  // SDPA defaults: HiFi2, approx on, 16-bit Dst.
  ComputeConfig compute;
  // Multi-head latent attention (TT-NN's use_mla with head_dim_v, set by
  // flash_mla_prefill, whose attributes key it; not an option of sdpa): V
  // is K's first head_dim_v columns, read from K's tiles, so V's shape is
  // (b, nkv, s_k, head_dim_v) and the output's last dim head_dim_v. 0: V
  // has K's shape.
  int64_t head_dim_v = 0;

  // The fields (util/fields.h): the op's own --option keys, then the
  // compute config. They key the program and fill the --json report.
  // shared_fields: the program config and the scale, which chunked SDPA
  // (always causal, no mask, window or sink) takes too.
  template <class V>
  void shared_fields(V& v) {
    v("q_chunk_size", q_chunk_size, "rows of Q per chunk, a multiple of 32 dividing s (default 32)");
    v("k_chunk_size", k_chunk_size, "keys per chunk, a multiple of 32 dividing s (default 32)");
    v("exp_approx_mode", exp_approx_mode,
      "true/false: the exp of the rescale factor exp(m_old - m_new) (default true)");
    v("scale", scale, "the score scale (default 1/sqrt(dh)), truncated to bf16 as the reader does");
  }
  template <class V>
  void fields(V& v) {
    shared_fields(v);
    v("is_causal", is_causal, "true/false (default true; a MASK needs false)");
    v("sliding_window_size", sliding_window_size,
      "keys per query window (default 0: none); causal: [q-W+1, q], non-causal: [q-W/2, q+W/2]");
    v("attention_sink", attention_sink,
      "[s0, s1, ...]: one logit per query head, unscaled, held as bf16 (default none)");
    compute.fields(v, fields::kDerived);
  }
};

// The scale as the reader puts it in its bf16 scalar tile: the float's top
// 16 bits (truncation).
float sdpa_scale_bf16(const SdpaConfig& cfg, int64_t dh);

// The output's shape: Q's with V's head dim (dv; dh unless MLA).
Shape sdpa_out_shape(const TileTensor& q, const TileTensor& v);

// out = SDPA(q, k, v [+ mask]).
//   q: (b, nqh, s, dh); k, v: (b, nkv, s_k, dh), nqh a multiple of nkv
//   (query head h reads kv head h / (nqh / nkv)); mask: nullptr or
//   (b, 1 or nqh, s, s_k), added to the scaled scores (non-causal only).
//   Causal needs s_k == s. out: (b, nqh, s, dv) in cfg.output, dv = dh or,
//   with cfg.head_dim_v, V's (b, nkv, s_k, head_dim_v).
// Work is split over (batch x head, q chunk) on ex's pool; ex.isa Scalar
// runs the lane models. Throws InputError on shapes or chunk sizes the op
// does not take.
//
// chunk_start > 0 is chunked prefill (the kernel's is_chunked with
// chunked_q_chunk_offset = chunk_start / q_chunk_size): Q's rows are the
// sequence positions [chunk_start, chunk_start + s) and K, V hold the keys
// from position 0 (gathered from the paged cache, sdpa.h); the causal
// bounds and mask use those positions. Causal only, no mask; chunk_start a
// multiple of q_chunk_size and k_chunk_size, K's length chunk_start + s
// rounded up to k_chunk_size.
void tt_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask, TileTensor& out,
             const SdpaConfig& cfg, const Exec& ex = Exec{}, int64_t chunk_start = 0);

// The oracle: the kernel's loops written out literally, one (q chunk, k
// chunk) pair at a time, every step on the scalar lane models, one thread.
// Bit-identical to tt_sdpa by construction of both from the same steps;
// tests compare them.
void tt_sdpa_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                    TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start = 0);

// Whether the kernel adds a mask to the scores of the chunk pair whose
// queries start at q_low and keys end at k_high: the causal or window mask
// on chunks that reach the diagonal (every chunk with a window), or a given
// mask on every chunk.
bool sdpa_chunk_masked(const SdpaConfig& cfg, int64_t q_low, int64_t k_high, bool has_mask);
// The generated mask's row for query position qpos over keys [k_low,
// k_low + n): 0 inside the causal / window bounds, -inf outside.
void sdpa_mask_row(const SdpaConfig& cfg, int64_t qpos, int64_t k_low, int64_t n, float* row);

// Why the op cannot take these shapes / this config, or "" (shapes are the
// logical ones: q (b, nqh, s, dh), k and v (b, nkv, s_k, dh), mask
// (b, 1 or nqh, s, s_k) or empty; chunk_start as tt_sdpa's).
std::string sdpa_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask, const SdpaConfig& cfg,
                         int64_t chunk_start = 0);

}  // namespace mha::ttsim
