// SDPA prefill, the fast path: the oracle's steps (sdpa_oracle.cpp) on the
// vector kernels, K^T and V decoded once per kv head, Q @ K^T for every key
// chunk a q chunk visits in one matrix-unit pass (each output element is the
// same Dst accumulation over dh whichever chunk it belongs to), tasks over
// (batch x head, q chunk) on the pool.
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ttsim/packer.h"
#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "util/error.h"

namespace mha::ttsim {

Shape sdpa_out_shape(const TileTensor& q, const TileTensor& v) { return {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}; }

float sdpa_scale_bf16(const SdpaConfig& cfg, int64_t dh) {
  return sdpa_truncate_bf16(cfg.scale.value_or(1.0f / std::sqrt(static_cast<float>(dh))));
}

bool sdpa_chunk_masked(const SdpaConfig& cfg, int64_t q_low, int64_t k_high, bool has_mask) {
  if (cfg.is_causal || cfg.sliding_window_size > 0) return q_low < k_high || cfg.sliding_window_size > 0;
  return has_mask;
}

void sdpa_mask_row(const SdpaConfig& cfg, int64_t qpos, int64_t k_low, int64_t n, float* row) {
  const int64_t W = cfg.sliding_window_size;
  int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();  // visible keys [lo, hi]
  if (cfg.is_causal) {
    hi = qpos;
    if (W > 0) lo = qpos - W + 1;
  } else if (W > 0) {
    lo = qpos - W / 2;
    hi = qpos + W / 2;
  }
  for (int64_t c = 0; c < n; ++c)
    row[c] = k_low + c < lo || k_low + c > hi ? -std::numeric_limits<float>::infinity() : 0.0f;
}

namespace {

// Chunked prefill's own rules (chunk_start > 0), or "": TT-NN's (the
// offset counted in whole q chunks; k chunks too since tt-metal #35811, a
// workaround for #35225) and the kernel's (causal, no mask, window or
// sink). K holds every key up to the chunk's end, rounded up to a k chunk.
std::string chunked_problem(const Shape& q, const Shape& k, const Shape* mask, const SdpaConfig& c,
                            int64_t chunk_start) {
  const std::string at = "chunk_start_idx " + std::to_string(chunk_start);
  if (chunk_start < 0) return "chunk_start_idx: expected a position >= 0, found " + std::to_string(chunk_start);
  if (!c.is_causal || mask) return at + ": chunked SDPA is causal, without a mask";
  if (c.sliding_window_size > 0 || !c.attention_sink.empty())
    return at + ": chunked SDPA takes no sliding_window_size or attention_sink";
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"q_chunk_size", c.q_chunk_size},
                                {"k_chunk_size", c.k_chunk_size}})
    if (chunk_start % n != 0)
      return at + " is not a multiple of " + name + " " + std::to_string(n) + " (TT-NN requires it)";
  const int64_t keys = (chunk_start + q[2] + c.k_chunk_size - 1) / c.k_chunk_size * c.k_chunk_size;
  if (k[2] != keys)
    return at + ": expected K and V gathered up to position " + std::to_string(keys) + " (chunk_start_idx + s " +
           "rounded up to k_chunk_size), found " + std::to_string(k[2]);
  return "";
}

}  // namespace

std::string sdpa_problem(const Shape& q, const Shape& k, const Shape& v, const Shape* mask, const SdpaConfig& c,
                         int64_t chunk_start) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return "expected Q (b, nqh, s, dh) and K, V (b, nkv, s, dh), 4-D each, found Q " + shape_str(q) + ", K " +
           shape_str(k) + ", V " + shape_str(v);
  if (c.head_dim_v > 0) {  // MLA: V is K's first head_dim_v columns
    if (c.head_dim_v > k[3] || Shape{k[0], k[1], k[2], c.head_dim_v} != v)
      return "head_dim_v " + std::to_string(c.head_dim_v) + ": expected V = K's first columns (at most K's head " +
             "dim " + std::to_string(k[3]) + "), found K " + shape_str(k) + " and V " + shape_str(v);
  } else if (k != v) {
    return "expected K and V of one shape, found K " + shape_str(k) + " and V " + shape_str(v);
  }
  if (k[0] != q[0] || k[3] != q[3])
    return "expected K and V with Q's batch and head dim (" + std::to_string(q[0]) + ", ., ., " +
           std::to_string(q[3]) + "), found " + shape_str(k);
  if (k[1] < 1 || q[1] % k[1] != 0)
    return "expected nqh (" + std::to_string(q[1]) + ") a multiple of nkv (" + std::to_string(k[1]) + ")";
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"q_chunk_size", c.q_chunk_size},
                                {"k_chunk_size", c.k_chunk_size}})
    if (n < 32 || n % 32 != 0) return std::string(name) + ": expected a positive multiple of 32, found " + std::to_string(n);
  if (q[2] % c.q_chunk_size != 0)
    return "q_chunk_size " + std::to_string(c.q_chunk_size) + " does not divide Q's sequence length " + std::to_string(q[2]);
  if (k[2] % c.k_chunk_size != 0)
    return "k_chunk_size " + std::to_string(c.k_chunk_size) + " does not divide K's sequence length " + std::to_string(k[2]);
  if (chunk_start != 0) return chunked_problem(q, k, mask, c, chunk_start);
  if (c.is_causal && k[2] != q[2])
    return "a causal SDPA needs K's sequence length (" + std::to_string(k[2]) + ") equal to Q's (" +
           std::to_string(q[2]) + ")";
  if (c.sliding_window_size < 0)
    return "sliding_window_size: expected 0 (none) or a positive number of keys, found " +
           std::to_string(c.sliding_window_size);
  if (!c.attention_sink.empty() && static_cast<int64_t>(c.attention_sink.size()) != q[1])
    return "attention_sink: expected one value per query head (" + std::to_string(q[1]) + "), found " +
           std::to_string(c.attention_sink.size());
  if (mask) {
    if (c.sliding_window_size > 0) return "a mask is given with sliding_window_size (the window is the mask)";
    if (c.is_causal) return "a mask is given with is_causal=true (TT-NN takes a mask only with is_causal=false)";
    const Shape& m = *mask;
    if (m.size() != 4 || m[0] != q[0] || (m[1] != 1 && m[1] != q[1]) || m[2] != q[2] || m[3] != k[2])
      return "expected MASK (" + std::to_string(q[0]) + ", 1 or " + std::to_string(q[1]) + ", " + std::to_string(q[2]) +
             ", " + std::to_string(k[2]) + "), found " + shape_str(m);
  }
  return "";
}

namespace {

// Per-thread buffers of one (batch x head, q chunk) task.
struct Work {
  SdpaScratch s;
  std::vector<float> S, O, acc, mrow, m_prev, m_cur, l_prev, l_cur;
};

// What every task of one tt_sdpa call shares: operands, the decoded K^T
// [dh, Sk] and V [Sk, dh] per kv head, shapes and the bf16 scale.
struct SdpaRun {
  const TileTensor& q;
  const TileTensor* mask;
  TileTensor& out;
  const SdpaConfig& cfg;
  const TileMath& tm;
  const std::vector<detail::In1Buffer>& kt;
  const std::vector<detail::In1Buffer>& vd;
  int64_t NQH, NKH, D, DV, Sk, QC, KC;  // D: Q's and K's padded width, DV: V's and the output's
  float scale;
  int64_t q_start;  // chunked prefill: the sequence position of Q's row 0
};

// Adds to key chunk [k_low, k_low + KC)'s scores S (rows of stride N) the
// given mask, or the causal / window rule's, when the chunk needs one.
// q_low: the chunk's first query position (a given mask implies q_start 0).
void mask_chunk(const SdpaRun& r, int64_t bh, int64_t q_low, int64_t k_low, float* S, int64_t N, Work& w) {
  if (!sdpa_chunk_masked(r.cfg, q_low, k_low + r.KC, r.mask != nullptr)) return;
  if (!r.mask) {
    for (int64_t i = 0; i < r.QC; ++i) {
      sdpa_mask_row(r.cfg, q_low + i, k_low, r.KC, w.mrow.data());
      sdpa_add(S + i * N, w.mrow.data(), r.KC, r.tm);
    }
    return;
  }
  const int64_t mh = r.mask->shape[1] == 1 ? bh / r.NQH : bh;
  for (int64_t i = 0; i < r.QC; ++i)
    sdpa_add(S + i * N, r.mask->matrix(mh) + (q_low + i) * r.mask->pcols + k_low, r.KC, r.tm);
}

// One online-softmax step over key chunk kc (scores S, masked): the running
// max, exp(S - max), the chunk's row sums and P @ V; from the second chunk
// on the previous sum and output are rescaled by exp(m_old - m_new) and the
// chunk's added.
void softmax_chunk(const SdpaRun& r, int64_t kvh, int64_t kc, float* S, int64_t N, Work& w) {
  const int64_t QC = r.QC, KC = r.KC, D = r.DV;
  for (int64_t i = 0; i < QC; ++i) {
    w.m_cur[i] = sdpa_row_max(S + i * N, KC);
    if (kc > 0) w.m_cur[i] = std::max(w.m_cur[i], w.m_prev[i]);
    sdpa_sub_exp(S + i * N, KC, w.m_cur[i], true, r.tm);
  }
  sdpa_row_sums(S, N, QC, KC, r.tm, w.s, w.l_cur.data());
  float* O = kc == 0 ? w.acc.data() : w.O.data();
  sdpa_matmul_decoded(S, N, QC, KC, r.vd[kvh], kc * KC, 0, D, r.tm, w.s, O, D);
  if (kc == 0) {
    w.l_prev = w.l_cur;
  } else {
    for (int64_t i = 0; i < QC; ++i) {
      const float alpha = sdpa_sub_exp1(w.m_prev[i], w.m_cur[i], r.cfg.exp_approx_mode, r.tm);
      w.l_prev[i] = sdpa_add1(w.l_cur[i], sdpa_mul1(w.l_prev[i], alpha, r.tm), r.tm);
      sdpa_mul_bcast(&w.acc[i * D], D, alpha, r.tm);
      sdpa_add(&w.acc[i * D], &w.O[i * D], D, r.tm);
    }
  }
  w.m_prev = w.m_cur;
}

// The sink of query head nq as one more key with no value: scaled as the
// scores are, it joins the running max, adds exp(sink - m) to the rescaled
// sum and rescales the output.
void apply_sink(const SdpaRun& r, int64_t nq, Work& w) {
  const float sink = sdpa_mul1(r.cfg.attention_sink[static_cast<size_t>(nq)], r.scale, r.tm);
  for (int64_t i = 0; i < r.QC; ++i) {
    const float m = std::max(w.m_prev[i], sink);
    const float alpha = sdpa_sub_exp1(w.m_prev[i], m, r.cfg.exp_approx_mode, r.tm);
    const float e = sdpa_sub_exp1(sink, m, true, r.tm);  // the chunk exps' approx exp
    w.l_prev[i] = sdpa_add1(e, sdpa_mul1(w.l_prev[i], alpha, r.tm), r.tm);
    sdpa_mul_bcast(&w.acc[i * r.DV], r.DV, alpha, r.tm);
  }
}

// Q chunk qc of batch x head bh: Q @ K^T over every key it visits (one
// matrix-unit pass: each output element is the same Dst accumulation over
// dh whichever chunk it belongs to), then the scale, then chunk by chunk
// the masked online softmax, the sink, 1/sum and the packer.
void run_q_chunk(const SdpaRun& r, int64_t bh, int64_t qc, Work& w) {
  const int64_t QC = r.QC, KC = r.KC, D = r.D, DV = r.DV;
  const int64_t nb = bh / r.NQH, nq = bh % r.NQH, kvh = nb * r.NKH + nq / (r.NQH / r.NKH);
  const int64_t q_low = qc * QC, q_pos = r.q_start + q_low, q_high = r.cfg.is_causal ? q_pos + QC : r.Sk;
  const int64_t nk = (q_high + KC - 1) / KC, N = nk * KC;
  w.S.resize(static_cast<size_t>(QC * N));
  w.O.resize(static_cast<size_t>(QC * DV));
  w.acc.resize(w.O.size());
  w.mrow.resize(static_cast<size_t>(KC));
  for (auto* x : {&w.m_prev, &w.m_cur, &w.l_prev, &w.l_cur}) x->resize(static_cast<size_t>(QC));
  sdpa_matmul_decoded(r.q.matrix(bh) + q_low * D, D, QC, D, r.kt[kvh], 0, 0, N, r.tm, w.s, w.S.data(), N);
  for (int64_t i = 0; i < QC; ++i) sdpa_mul_bcast(&w.S[i * N], N, r.scale, r.tm);
  for (int64_t kc = 0; kc < nk; ++kc) {
    float* S = w.S.data() + kc * KC;
    mask_chunk(r, bh, q_pos, kc * KC, S, N, w);
    softmax_chunk(r, kvh, kc, S, N, w);
  }
  if (!r.cfg.attention_sink.empty()) apply_sink(r, nq, w);
  for (int64_t i = 0; i < QC; ++i) {
    sdpa_mul_bcast(&w.acc[i * DV], DV, sdpa_recip1(w.l_prev[i], r.tm), r.tm);
    pack_from_dst(&w.acc[i * DV], r.out.matrix(bh) + (q_low + i) * DV, DV, r.cfg.compute.output,
                  r.cfg.compute.fp32_dest_acc_en, r.cfg.compute.bfp8_pack_precise);
  }
}

}  // namespace

void tt_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask, TileTensor& out,
             const SdpaConfig& cfg, const Exec& ex, int64_t chunk_start) {
  const simd::KernelTable* kern = ex.kernels(cfg.compute.arch);
  if (!kern) {
    tt_sdpa_oracle(q, k, v, mask, out, cfg, chunk_start);
    return;
  }
  const Shape* ms = mask ? &mask->shape : nullptr;
  const std::string p = sdpa_problem(q.shape, k.shape, v.shape, ms, cfg, chunk_start);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const int64_t B = q.shape[0], NQH = q.shape[1], NQC = q.rows / cfg.q_chunk_size;
  const TileMath tm(cfg.compute.math_fidelity, cfg.compute.fp32_dest_acc_en, cfg.compute.math_approx_mode, kern,
                    cfg.compute.arch);
  out = make_tile_tensor(sdpa_out_shape(q, v), cfg.compute.output);
  std::vector<detail::In1Buffer> kt, vd;
  sdpa_decode_kv(k, v, tm.fp32, k.rows, ex, kt, vd);
  const SdpaRun run{q, mask, out, cfg, tm, kt, vd, NQH, k.shape[1], q.pcols, v.pcols, k.rows, cfg.q_chunk_size,
                    cfg.k_chunk_size, sdpa_scale_bf16(cfg, q.cols), chunk_start};
  std::vector<Work> work(static_cast<size_t>(ex.threads()));
  // Tasks: (bh, q chunk), the longest (last) causal chunks first.
  ex.parallel_for(B * NQH * NQC, [&](int64_t t, int th) {
    run_q_chunk(run, t % (B * NQH), NQC - 1 - t / (B * NQH), work[static_cast<size_t>(th)]);
  });
}

}  // namespace mha::ttsim
