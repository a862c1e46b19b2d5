// compute_common.hpp's sdpa_standard (tt_metal latest, fp32 Dst) loop by
// loop: one (batch x head, q chunk) at a time, each step on the values of
// the circular buffer it reads and packed to the format of the one it
// writes (sdpa_standard.h lists what differs from the 2024 kernel).
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "backends/ttsim/ops/sdpa/sdpa_window.h"
#include "backends/ttsim/ttsim_device.h"
#include "tensor/half.h"
#include "ttsim/kblock.h"
#include "ttsim/operands.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// A Float32 CB value as the unpacker puts it in Src with an fp32 Dst.
float tf32(float x) { return unpack_to_src(x, DataFormat::Float32, true); }
// An fp32 Dst value packed to a Float32 / Float16_b CB.
float pack_f32(float x) {
  pack_dst(&x, &x, 1, DataFormat::Float32, true, PackSrc::Float32);
  return x;
}
float pack_bf16(float x) {
  pack_dst(&x, &x, 1, DataFormat::Bfloat16, true, PackSrc::Bfloat16);
  return x;
}

// One kernel call's constants, on the inputs padded to whole chunks
// (streaming_pad: the factory's padded_Sq / padded_Sk, zeros).
struct Job {
  const TileTensor &q, &k, &v;
  const TileTensor* mask;
  const SdpaConfig& cfg;
  int64_t NQH, NKH, D, VD, QC, KC, Skt;
  int64_t chunk_start;  // chunked prefill: Q's row 0 is this sequence position
  int64_t s_k;          // K's logical length
  bool padded_mask;     // use_padded_mask: non-causal with padded lengths
  float scale;       // scale_fp32: the scores' exp takes it whole
  float scale_bf16;  // scale_fp32 >> 16: exp(m_old - m_new) takes it cut
  // The vector path's K^T (one block per k chunk) and V per kv head,
  // decoded once (sdpa_decode_kv); nullptr on the lane models.
  const std::vector<detail::In1Buffer>* kt = nullptr;
  const std::vector<detail::In1Buffer>* vd = nullptr;
};

// Per-thread buffers: the scores (qk_im), and the ping-pong statistics and
// outputs (index 0/1: *_A/*_B), a row's sum tile being its 32 partial sums.
struct Scratch {
  std::vector<float> S;
  std::vector<float> m[2], sum[2], out[2];
  std::vector<float> row;  // one output row's products
  SdpaScratch mm;
  std::vector<simd::ARec> qrec;  // the vector path's q chunk decoded as in0, once for its k chunks
};

// in0 as the vector path decodes it: a Float32 CB as TF32, else bf16 values.
void std_decode_in0(const float* a, int64_t lda, int64_t rows, int64_t K, bool a_f32, const TileMath& m,
                    std::vector<simd::ARec>& rec) {
  rec.resize(static_cast<size_t>(rows * K * m.phases));
  detail::decode_in0(a, lda, rows, K, a_f32 ? DataFormat::Float32 : DataFormat::Bfloat16, true, m.phases, rec.data());
}

// matmul_blocks with all of K in Dst (in0 in SrcB, in1 in SrcA), the fp32
// Dst left unpacked: out[r, c] for r < rows, c < N. in0 is a Float32 CB
// (TF32 in Src) when a_f32, else bf16-exact values; in1 element (k, c) is
// b[k*ks + c*ns]. Per output: K tiles outer, fidelity phases, faces inner.
void std_matmul(const float* a, int64_t lda, int64_t rows, int64_t K, bool a_f32, const float* b, int64_t ks,
                int64_t ns, int64_t N, const TileMath& m, SdpaScratch& s, float* out, int64_t ldo) {
  if (m.kern) {
    s.in1.resize(K, N);
    detail::decode_in1(b, ks, ns, K, N, DataFormat::Bfloat16, true, s.in1, 0);
    std_decode_in0(a, lda, rows, K, a_f32, m, s.arec);
    sdpa_mvmul(s.arec.data(), rows, K, s.in1.view(), N, m, out, ldo);
    return;
  }
  sdpa_matmul_lanes(a, lda, rows, K, a_f32, b, ks, ns, N, m, out, ldo);
}

// QK = Q_chunk @ K_chunk^T into qk_im (Float32), then QK += mask: the
// lightweight causal palette stamped by L1 accumulation (-inf right of the
// diagonal tile, the diagonal tile's 0 / -inf) on chunks that reach the
// diagonal, or a given mask by ELWADD on every chunk; with a window, the
// writer's generated window mask (Bfp4_b: 0 and -inf exact) by ELWADD on
// every chunk (apply_mask is true for all of them; none is skipped).
void scores(const Job& j, int64_t nb, int64_t bh, int64_t kvh, int64_t q_low, int64_t k_low, const TileMath& tm,
            Scratch& s) {
  const int64_t QC = j.QC, KC = j.KC, q_pos = j.chunk_start + q_low;  // the mask's frame: sequence positions
  if (j.kt)  // Q decoded by q_chunk, K^T by sdpa_decode_kv: the chunk's block
    sdpa_mvmul(s.qrec.data(), QC, j.D, (*j.kt)[static_cast<size_t>(kvh)].view(k_low / KC * j.D, 0), KC, tm,
               s.S.data(), KC);
  else
    std_matmul(j.q.matrix(bh) + q_low * j.D, j.D, QC, j.D, j.q.format == DataFormat::Float32,
               j.k.matrix(kvh) + k_low * j.D, 1, j.D, KC, tm, s.mm, s.S.data(), KC);
  pack_dst(s.S.data(), s.S.data(), QC * KC, DataFormat::Float32, true, PackSrc::Float32);
  // add_block_inplace: ELWADD of a mask row (bf16-exact values) onto the
  // TF32 scores, packed back to Float32.
  auto add_mask_row = [&](int64_t r, const float* mrow) {
    for (int64_t c = 0; c < KC; ++c) s.S[r * KC + c] = pack_f32(fpu_add(tf32(s.S[r * KC + c]), mrow[c], true, tm.arch));
  };
  if (j.mask) {
    const int64_t mh = j.mask->shape[1] == 1 ? nb : bh;
    for (int64_t r = 0; r < QC; ++r) add_mask_row(r, j.mask->matrix(mh) + (q_low + r) * j.mask->pcols + k_low);
  } else if (j.cfg.sliding_window_size > 0) {
    s.row.resize(static_cast<size_t>(KC));
    for (int64_t r = 0; r < QC; ++r) {
      const int64_t qp = q_pos + r;
      for (int64_t c = 0; c < KC; ++c)
        s.row[static_cast<size_t>(c)] = sdpa_window_generated_masks(j.cfg.sliding_window_size, qp / kTile,
                                                                    (k_low + c) / kTile, qp % kTile, (k_low + c) % kTile)
                                            ? kNegInf
                                            : 0.0f;
      add_mask_row(r, s.row.data());
    }
  } else if (j.padded_mask) {
    // use_padded_mask: on the last k chunk only, the writer's generated
    // mask (Bfp4_b; its 0 and -inf are exact): -inf on keys past s_k.
    if (k_low + KC != j.k.rows) return;
    s.row.resize(static_cast<size_t>(KC));
    for (int64_t c = 0; c < KC; ++c) s.row[static_cast<size_t>(c)] = k_low + c < j.s_k ? 0.0f : kNegInf;
    for (int64_t r = 0; r < QC; ++r) add_mask_row(r, s.row.data());
  } else if (j.cfg.is_causal && q_pos / kTile < (k_low + KC) / kTile) {
    for (int64_t r = 0; r < QC; ++r) {
      const int64_t qp = q_pos + r;
      for (int64_t c = 0; c < KC; ++c) {
        const int64_t kp = k_low + c;
        if (kp / kTile < qp / kTile) continue;  // left of the diagonal tile: no stamp
        float& x = s.S[r * KC + c];
        x = l1_acc_fp32(x, kp > qp ? kNegInf : 0.0f);
      }
    }
  }
}

// reduce_c<MAX> over the TF32 scores, binary_max_tile with the previous max
// (from the second chunk), packed to the Float16_b max CB.
void row_max(const Job& j, bool has_prev, const float* m_prev, const Scratch& s, float* m) {
  for (int64_t r = 0; r < j.QC; ++r) {
    float mx = has_prev ? m_prev[r] : kNegInf;
    for (int64_t c = 0; c < j.KC; ++c) mx = std::max(mx, tf32(s.S[r * j.KC + c]));
    m[r] = pack_bf16(mx);
  }
}

// sub_exp_block_bcast_cols_inplace: P = exp((QK - m) * scale) (ELWSUB, the
// scaled fast approx exp, packer ReLU) back into qk_im, and the row's exp
// tiles L1-accumulated into its sum tile (the first tile written, the rest
// added in column-tile order).
// exp((x - m) * scale) on n values of a CB in place: TF32 in Src (exact
// for a bf16 CB), ELWSUB, the scaled fast exp, packer ReLU, packed Float32.
void sub_exp_row(float* row, int64_t n, float m, float scale, const TileMath& tm) {
  for (int64_t c = 0; c < n; ++c) row[c] = tf32(row[c]);
  const float neg = -m;
  if (tm.kern) tm.kern->elwadd(row, &neg, 0, n, true, row);
  else for (int64_t c = 0; c < n; ++c) row[c] = fpu_add(row[c], neg, true, tm.arch);
  sfpu_exp_fast_approx_scaled(row, n, scale, tm.kern, tm.arch, row);
  for (int64_t c = 0; c < n; ++c) row[c] = std::signbit(row[c]) ? 0.0f : row[c];  // packer ReLU
  pack_dst(row, row, n, DataFormat::Float32, true, PackSrc::Float32);
}

void sub_exp(const Job& j, const float* m, const TileMath& tm, Scratch& s, float* sum) {
  const int64_t KC = j.KC;
  for (int64_t r = 0; r < j.QC; ++r) {
    float* row = &s.S[r * KC];
    float* st = &sum[r * kTile];
    sub_exp_row(row, KC, m[r], j.scale, tm);
    std::copy(row, row + kTile, st);
    for (int64_t t = kTile; t < KC; t += kTile) l1_acc_fp32(st, row + t, kTile);
  }
}

// From the second chunk: alpha = exp((m_prev - m) * scale_bf16) (ELWSUB, the
// SFPU multiply, the accurate fp32 exp: EXP_APPROX_MODE on), packed bf16;
// sum_prev *= alpha, sum += sum_prev (Float32, tile-wide); out += out_prev *
// alpha by L1 accumulation in bf16.
// sub_exp_block: exp((m_prev - m) * scale_bf16) (ELWSUB, the SFPU multiply,
// EXP_APPROX_MODE on: _ckernel_sfpu_exp_accurate_; off: the polynomial),
// packed to the Float16_b exp_max_diff.
float alpha_of(const Job& j, float m_prev, float m, const TileMath& tm) {
  const float d = fpu_add(m_prev, -m, true, tm.arch);
  return pack_bf16(sdpa_exp_first_column(d, j.scale_bf16, j.cfg.exp_approx_mode, true, tm.arch));
}

// out[0, n) = in * alpha (ELWMUL, alpha broadcast in SrcB) in the fp32 Dst.
void mul_alpha(const float* in, int64_t n, float alpha, const TileMath& tm, float* out) {
  if (tm.kern) tm.kern->elwmul(in, &alpha, 0, n, tm.phases, true, out);
  else for (int64_t c = 0; c < n; ++c) out[c] = fpu_mul(in[c], alpha, tm.fidelity, true, tm.arch);
}

void rescale(const Job& j, const float* m_prev, const float* m, const float* sum_prev, const float* out_prev,
             const TileMath& tm, Scratch& s, float* sum, float* out) {
  for (int64_t r = 0; r < j.QC; ++r) {
    const float alpha = alpha_of(j, m_prev[r], m[r], tm);
    float sp[kTile], cur[kTile];
    for (int64_t c = 0; c < kTile; ++c) sp[c] = tf32(sum_prev[r * kTile + c]), cur[c] = tf32(sum[r * kTile + c]);
    mul_alpha(sp, kTile, alpha, tm, sp);
    pack_dst(sp, sp, kTile, DataFormat::Float32, true, PackSrc::Float32);
    for (float& x : sp) x = tf32(x);
    if (tm.kern) tm.kern->elwadd(cur, sp, 1, kTile, true, cur);
    else for (int64_t c = 0; c < kTile; ++c) cur[c] = fpu_add(cur[c], sp[c], true, tm.arch);
    pack_dst(cur, sum + r * kTile, kTile, DataFormat::Float32, true, PackSrc::Float32);
    s.row.resize(static_cast<size_t>(j.VD));
    float* x = s.row.data();
    mul_alpha(out_prev + r * j.VD, j.VD, alpha, tm, x);
    pack_from_dst(x, x, j.VD, DataFormat::Bfloat16, true, false);
    if (tm.kern) tm.kern->l1_acc_bf16(out + r * j.VD, x, j.VD);
    else for (int64_t c = 0; c < j.VD; ++c) out[r * j.VD + c] = l1_acc_bf16(out[r * j.VD + c], x[c]);
  }
}

// matmul_reduce (the sum tile @ a column of ones, Float32), the first-column
// legacy reciprocal (copy_tile through SrcA), out = out_acc * (1/sum) packed
// to the output's dtype.
// l[r] = (sum tile @ column of ones)[r, 0]: matmul_reduce, one tile of K.
void reduce_sums(const Job& j, const float* sum, const TileMath& tm, Scratch& s, float* l) {
  if (tm.kern) {  // the whole tile on the vector kernels; column 0 is the one read
    static const std::vector<float> ones_col = [] {
      std::vector<float> b(static_cast<size_t>(kTile * kTile), 0.0f);
      for (int64_t k = 0; k < kTile; ++k) b[static_cast<size_t>(k * kTile)] = 1.0f;
      return b;
    }();
    s.row.resize(static_cast<size_t>(j.QC * kTile));
    std_matmul(sum, kTile, j.QC, kTile, true, ones_col.data(), kTile, 1, kTile, tm, s.mm, s.row.data(), kTile);
    for (int64_t r = 0; r < j.QC; ++r) l[r] = s.row[static_cast<size_t>(r * kTile)];
    return;
  }
  float srcb[16], ones[16];
  std::fill(ones, ones + 16, 1.0f);
  for (int64_t r = 0; r < j.QC; ++r) {
    l[r] = 0.0f;
    for (int p = 0; p < tm.phases; ++p)
      for (int64_t kf = 0; kf < kTile; kf += kFace) {
        for (int i = 0; i < 16; ++i) srcb[i] = tf32(sum[r * kTile + kf + i]);
        l[r] = fpu_dot16(srcb, ones, l[r], p, true, true, tm.arch);
      }
  }
}

// The attention sink after matmul_reduce (compute_common.hpp at 637d956c):
// the reader's sink tile holds the head's bf16 logit in column 0 (-inf
// elsewhere), compared with the unscaled running max and scaled inside
// the exp like a score. m' = max(m, sink) (reduce_c onto the previous
// max), alpha = exp((m - m') * scale) as in rescale; l = l * alpha (ELWMUL,
// Float32) + exp((sink - m') * scale) (sub_exp with packer ReLU, Float32),
// by ELWADD; O = O * alpha packed bf16 (no L1 accumulation): the sink adds
// to the denominator only.
void apply_sink(const Job& j, int64_t nq, const float* m, const TileMath& tm, float* l, float* acc) {
  const float sink = j.cfg.attention_sink[static_cast<size_t>(nq)];
  TileMath lane = tm;  // one value per row: the lane models (the kernels take whole rows)
  lane.kern = nullptr;
  for (int64_t r = 0; r < j.QC; ++r) {
    const float m_new = pack_bf16(std::max(m[r], sink));
    const float alpha = alpha_of(j, m[r], m_new, tm);
    float lp = tf32(l[r]), e = sink;
    mul_alpha(&lp, 1, alpha, lane, &lp);
    lp = pack_f32(lp);
    sub_exp_row(&e, 1, m_new, j.scale, lane);
    l[r] = pack_f32(fpu_add(tf32(e), tf32(lp), true, tm.arch));
    float* o = acc + r * j.VD;
    mul_alpha(o, j.VD, alpha, tm, o);
    pack_from_dst(o, o, j.VD, DataFormat::Bfloat16, true, false);
  }
}

// ls: the reduced row sums (Float32 CB values).
void normalize(const Job& j, int64_t bh, int64_t q_low, const float* ls, const float* acc, const TileMath& tm,
               TileTensor& out) {
  const ComputeConfig& cc = j.cfg.compute;
  std::vector<float> row(static_cast<size_t>(j.VD));
  const int64_t rows = std::min(j.QC, out.rows - q_low);  // padded query rows are not written
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = pack_f32(sfpu_reciprocal_legacy(tf32(ls[r]), cc.math_approx_mode, true, tm.arch));
    const float b = tf32(inv);
    if (tm.kern) tm.kern->elwmul(acc + r * j.VD, &b, 0, j.VD, tm.phases, true, row.data());
    else for (int64_t c = 0; c < j.VD; ++c) row[static_cast<size_t>(c)] = fpu_mul(acc[r * j.VD + c], b, tm.fidelity, true, tm.arch);
    float* o = out.matrix(bh) + (q_low + r) * out.pcols;
    pack_from_dst(row.data(), o, j.VD, cc.output, true, cc.bfp8_pack_precise);
  }
}

// One q chunk: the key chunks up to the causal limit, then the
// normalisation (the kernel's per-Q-chunk body).
void q_chunk(const Job& j, int64_t bh, int64_t qc, const TileMath& tm, Scratch& s, TileTensor& out) {
  const int64_t nb = bh / j.NQH, nq = bh % j.NQH, kvh = nb * j.NKH + nq / (j.NQH / j.NKH);
  // is_chunked: q_chunk = chunked_q_chunk_offset + q_chunk sets the causal
  // bounds; Q's rows are read from the chunk's own tensor.
  const int64_t q_low = qc * j.QC, q_tile = (j.chunk_start + q_low) / kTile, kct = j.KC / kTile;
  const int64_t q_high_tile = j.cfg.is_causal ? std::min(q_tile + j.QC / kTile, j.Skt) : j.Skt;
  const int64_t k_end = (q_high_tile + kct - 1) / kct;
  s.S.resize(static_cast<size_t>(j.QC * j.KC));
  if (j.kt) std_decode_in0(j.q.matrix(bh) + q_low * j.D, j.D, j.QC, j.D, j.q.format == DataFormat::Float32, tm, s.qrec);
  for (int i = 0; i < 2; ++i) {
    s.m[i].resize(static_cast<size_t>(j.QC));
    s.sum[i].resize(static_cast<size_t>(j.QC * kTile));
    s.out[i].resize(static_cast<size_t>(j.QC * j.VD));
  }
  int prev = 0;
  for (int64_t kc = 0; kc < k_end; ++kc) {
    const int cur = 1 - prev;
    const int64_t k_low = kc * j.KC;
    scores(j, nb, bh, kvh, q_low, k_low, tm, s);
    row_max(j, kc > 0, s.m[prev].data(), s, s.m[cur].data());
    sub_exp(j, s.m[cur].data(), tm, s, s.sum[cur].data());
    // OUT_IM = P @ V_chunk: P from the Float32 qk_im (TF32 in SrcB), packed bf16.
    float* o = s.out[cur].data();
    if (j.vd) {
      std_decode_in0(s.S.data(), j.KC, j.QC, j.KC, true, tm, s.mm.arec);
      sdpa_mvmul(s.mm.arec.data(), j.QC, j.KC, (*j.vd)[static_cast<size_t>(kvh)].view(k_low, 0), j.VD, tm, o, j.VD);
    } else {
      std_matmul(s.S.data(), j.KC, j.QC, j.KC, true, j.v.matrix(kvh) + k_low * j.VD, j.VD, 1, j.VD, tm, s.mm, o, j.VD);
    }
    pack_dst(o, o, j.QC * j.VD, DataFormat::Bfloat16, true, PackSrc::Bfloat16);
    if (kc > 0)
      rescale(j, s.m[prev].data(), s.m[cur].data(), s.sum[prev].data(), s.out[prev].data(), tm, s, s.sum[cur].data(), o);
    prev = cur;
  }
  // matmul_reduce, packed to the Float32 sum CB; the sink; 1/l and O / l.
  std::vector<float> ls(static_cast<size_t>(j.QC));
  reduce_sums(j, s.sum[prev].data(), tm, s, ls.data());
  for (float& l : ls) l = pack_f32(l);
  if (!j.cfg.attention_sink.empty()) apply_sink(j, nq, s.m[prev].data(), tm, ls.data(), s.out[prev].data());
  normalize(j, bh, q_low, ls.data(), s.out[prev].data(), tm, out);
}

// On the padded inputs; q_rows and s_k are the logical lengths.
Job make_job(const StreamingInputs& in, int64_t q_rows, const SdpaConfig& cfg, int64_t chunk_start) {
  const TileTensor &q = in.q, &k = in.k;
  const float scale = sdpa_latest_scale(cfg, q);
  const bool padded = !cfg.is_causal && (q.rows != q_rows || k.rows != in.s_k);
  return Job{q, k, in.v, in.has_mask ? &in.mask : nullptr, cfg, q.shape[1], k.shape[1], q.pcols, in.v.pcols,
             cfg.q_chunk_size, cfg.k_chunk_size, k.rows / kTile, chunk_start, in.s_k, padded && !in.has_mask,
             scale, sdpa_truncate_bf16(scale)};
}

}  // namespace

std::string sdpa_standard_gap(const SdpaConfig& cfg) {
  if (cfg.sliding_window_size > 0 && !cfg.is_causal)
    return "sliding_window_size with is_causal=false is not modelled at tt_metal latest with fp32_dest_acc_en: its "
           "writer generates window masks only up to each q chunk's diagonal while the kernel adds one to every k "
           "chunk (fp32_dest_acc_en off runs it)";
  return "";
}

int64_t sdpa_standard_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                               const SdpaConfig& cfg) {
  const int64_t sq = cfg.q_chunk_size / kTile, sk = cfg.k_chunk_size / kTile, dht = q.pcols / kTile;
  const int64_t vdht = v.pcols / kTile, bf16 = tile_bytes(DataFormat::Bfloat16), f32 = tile_bytes(DataFormat::Float32);
  int64_t b = sq * dht * tile_bytes(q.format) * 2 + sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format)) * 2;
  const bool padded = q.rows % cfg.q_chunk_size != 0 || k.rows % cfg.k_chunk_size != 0;
  if (mask) b += sq * sk * tile_bytes(mask->format) * 2;
  else if (cfg.sliding_window_size > 0) b += sq * sk * tile_bytes(DataFormat::Bfp4_b) * 2;  // the generated mask
  else if (cfg.is_causal) b += 2 * bf16;  // the lightweight palette: -inf, diagonal
  else if (padded) b += sq * sk * tile_bytes(DataFormat::Bfp4_b) * 2;  // the generated padding mask
  if (!cfg.attention_sink.empty()) b += sq * bf16;                     // the sink, one tile per q row tile
  b += sq * sk * f32 + 2 * sq * f32;        // qk_im, sum_A/B
  // out_im_A/B, max_A/B, exp_max_diff; the identities in scalar_df (Float32 with a float32 Q)
  b += 2 * sq * vdht * bf16 + 3 * sq * bf16 + 2 * (q.format == DataFormat::Float32 ? f32 : bf16);
  return b + sq * vdht * tile_bytes(cfg.compute.output);
}

void tt_sdpa_standard_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                             TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start) {
  tt_sdpa_standard(q, k, v, mask, out, cfg, Exec{simd::Isa::Scalar, nullptr}, chunk_start);
}

void tt_sdpa_standard(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      TileTensor& out, const SdpaConfig& cfg, const Exec& ex, int64_t chunk_start) {
  const Shape* ms = mask ? &mask->shape : nullptr;
  const std::string p = chunk_start != 0 ? sdpa_problem(q.shape, k.shape, v.shape, ms, cfg, chunk_start)
                                         : sdpa_padded_problem(q.shape, k.shape, v.shape, ms, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const std::string gap = sdpa_standard_gap(cfg);
  if (!gap.empty()) throw InputError("sdpa: " + gap);
  const StreamingInputs in = streaming_pad(q, k, v, mask, cfg);
  Job j = make_job(in, q.rows, cfg, chunk_start);
  const ComputeConfig& cc = cfg.compute;
  const TileMath tm(cc.math_fidelity, true, cc.math_approx_mode, ex.kernels(cc.arch), cc.arch);
  std::vector<detail::In1Buffer> kt, vd;
  if (tm.kern) {
    sdpa_decode_kv(in.k, in.v, true, cfg.k_chunk_size, ex, kt, vd);
    j.kt = &kt;
    j.vd = &vd;
  }
  out = make_tile_tensor(sdpa_out_shape(q, v), cc.output);
  const int64_t heads = q.shape[0] * j.NQH, nqc = j.q.rows / j.QC;
  std::vector<Scratch> scratch(static_cast<size_t>(std::max(1, ex.threads())));
  // Tasks: (bh, q chunk), the longest (last) causal chunks first, so that
  // no long one is left alone at the end.
  ex.parallel_for(heads * nqc, [&](int64_t t, int th) {
    q_chunk(j, t % heads, nqc - 1 - t / heads, tm, scratch[static_cast<size_t>(th)], out);
  });
}

}  // namespace mha::ttsim
