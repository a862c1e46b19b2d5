// compute_common.hpp's sdpa_standard (tt_metal latest, fp32 Dst) loop by
// loop: one (batch x head, q chunk) at a time, each step on the values of
// the circular buffer it reads and packed to the format of the one it
// writes (sdpa_standard.h lists what differs from the 2024 kernel).
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/ttsim/ops/sdpa/sdpa_common.h"
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

// SFP_STOCH_RND to a sign-magnitude integer, round to nearest even,
// saturating at +-lim (FP32_TO_INT8: 127; FP32_TO_UINT8: 0..255).
float sfpu_round_int(float x, float lo, float hi) { return std::min(hi, std::max(lo, std::nearbyint(x))); }

// calculate_exponential_polynomial<SCALE_EN, .., no SFPARECIP, degree 4
// with an fp32 Dst (2 otherwise)> (ckernel_sfpu_sdpa.h at 637d956c): x times
// the bf16 scale, k = round(x / ln2) as int8, r = x - k ln2, a polynomial in
// r, times 2^k built from k + 127 as the exponent field; 0 where k + 127 is
// not positive. What exp_approx_mode=false runs for exp(m_old - m_new) (the
// flag is inverted at that site).
float exp_poly(float x, float scale_bf16, bool fp32, Arch a) {
  static const float c2p[3] = {0.999848792924395313327307061545061386175496934006f,
                               1.01508760098521056684783640695492761469306929535975f,
                               0.50628367056745568861842335616023694454759126020461f};
  static const float c4p[5] = {1.0000001510806179002040134468008959160576106495165f,
                               0.99996228117047652035114096488703457970402030983204f,
                               0.49998365704615426417337683145647067790385638465486f,
                               0.16792157982882225102649214918047336097544632172075f,
                               4.1959439860014343843000081999668024587178974865521e-2f};
  x = sfpu_mul(x, scale_bf16, a);
  const float k = sfpu_round_int(sfpu_mul(x, 1.44269504088896340736f, a), -127.0f, 127.0f);
  const float r = sfpu_mad(k, -0.69314718055994530942f, x, a);
  float p;
  if (fp32) {
    p = sfpu_mad(r, c4p[4], c4p[3], a);
    for (int i = 2; i >= 0; --i) p = sfpu_mad(r, p, c4p[i], a);
  } else {
    p = sfpu_mad(r, sfpu_mad(r, c2p[2], c2p[1], a), c2p[0], a);
  }
  const float kb = sfpu_add(k, 127.0f, a);  // SFPADDI 0x42fe
  const uint32_t e = static_cast<uint32_t>(sfpu_round_int(kb, 0.0f, 255.0f));
  float y = sfpu_mul(p, f32_from_bits(e << 23), a);  // SFPSETEXP on +0
  if (!(kb > 0.0f)) y = 0.0f;                        // SFPSETCC, SFPLOADI 0
  return fp32 ? y : pack_bf16(y);
}

// One kernel call's constants.
struct Job {
  const TileTensor &q, &k, &v;
  const TileTensor* mask;
  const SdpaConfig& cfg;
  int64_t NQH, NKH, D, VD, QC, KC, Skt;
  float scale;       // scale_fp32: the scores' exp takes it whole
  float scale_bf16;  // scale_fp32 >> 16: exp(m_old - m_new) takes it cut
};

// Per-thread buffers: the scores (qk_im), and the ping-pong statistics and
// outputs (index 0/1: *_A/*_B), a row's sum tile being its 32 partial sums.
struct Scratch {
  std::vector<float> S;
  std::vector<float> m[2], sum[2], out[2];
  std::vector<float> row;  // one output row's products
  SdpaScratch mm;
};

// matmul_blocks with all of K in Dst (in0 in SrcB, in1 in SrcA), the fp32
// Dst left unpacked: out[r, c] for r < rows, c < N. in0 is a Float32 CB
// (TF32 in Src) when a_f32, else bf16-exact values; in1 element (k, c) is
// b[k*ks + c*ns]. Per output: K tiles outer, fidelity phases, faces inner.
void std_matmul(const float* a, int64_t lda, int64_t rows, int64_t K, bool a_f32, const float* b, int64_t ks,
                int64_t ns, int64_t N, const TileMath& m, SdpaScratch& s, float* out, int64_t ldo) {
  if (m.kern) {
    s.in1.resize(K, N);
    detail::decode_in1(b, ks, ns, K, N, DataFormat::Bfloat16, true, s.in1, 0);
    const int64_t rec = K * m.phases;
    s.arec.resize(static_cast<size_t>(rows * rec));
    detail::decode_in0(a, lda, rows, K, a_f32 ? DataFormat::Float32 : DataFormat::Bfloat16, true, m.phases,
                       s.arec.data());
    for (int64_t r = 0; r < rows; ++r) std::fill(out + r * ldo, out + r * ldo + N, 0.0f);
    m.kern->mvmul(s.arec.data(), rec, rows, s.in1.view(), N, K / kTile, m.phases, true,
                  reinterpret_cast<uint32_t*>(out), ldo);
    return;
  }
  sdpa_matmul_lanes(a, lda, rows, K, a_f32, b, ks, ns, N, m, out, ldo);
}

// QK = Q_chunk @ K_chunk^T into qk_im (Float32), then QK += mask: the
// lightweight causal palette stamped by L1 accumulation (-inf right of the
// diagonal tile, the diagonal tile's 0 / -inf) on chunks that reach the
// diagonal, or a given mask by ELWADD on every chunk.
void scores(const Job& j, int64_t nb, int64_t bh, int64_t kvh, int64_t q_low, int64_t k_low, const TileMath& tm,
            Scratch& s) {
  const int64_t QC = j.QC, KC = j.KC;
  std_matmul(j.q.matrix(bh) + q_low * j.D, j.D, QC, j.D, false, j.k.matrix(kvh) + k_low * j.D, 1, j.D, KC, tm, s.mm,
             s.S.data(), KC);
  pack_dst(s.S.data(), s.S.data(), QC * KC, DataFormat::Float32, true, PackSrc::Float32);
  if (j.mask) {
    const int64_t mh = j.mask->shape[1] == 1 ? nb : bh;
    for (int64_t r = 0; r < QC; ++r) {
      const float* mrow = j.mask->matrix(mh) + (q_low + r) * j.mask->pcols + k_low;
      for (int64_t c = 0; c < KC; ++c) s.S[r * KC + c] = pack_f32(fpu_add(tf32(s.S[r * KC + c]), mrow[c], true, tm.arch));
    }
  } else if (j.cfg.is_causal && q_low / kTile < (k_low + KC) / kTile) {
    for (int64_t r = 0; r < QC; ++r) {
      const int64_t qp = q_low + r;
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
void sub_exp(const Job& j, const float* m, const TileMath& tm, Scratch& s, float* sum) {
  const int64_t KC = j.KC;
  for (int64_t r = 0; r < j.QC; ++r) {
    float* row = &s.S[r * KC];
    float* st = &sum[r * kTile];
    for (int64_t c = 0; c < KC; ++c) row[c] = tf32(row[c]);
    const float neg = -m[r];
    if (tm.kern) tm.kern->elwadd(row, &neg, 0, KC, true, row);
    else for (int64_t c = 0; c < KC; ++c) row[c] = fpu_add(row[c], neg, true, tm.arch);
    sfpu_exp_fast_approx_scaled(row, KC, j.scale, tm.kern, tm.arch, row);
    for (int64_t c = 0; c < KC; ++c) row[c] = std::signbit(row[c]) ? 0.0f : row[c];  // packer ReLU
    pack_dst(row, row, KC, DataFormat::Float32, true, PackSrc::Float32);
    std::copy(row, row + kTile, st);
    for (int64_t t = kTile; t < KC; t += kTile) l1_acc_fp32(st, row + t, kTile);
  }
}

// From the second chunk: alpha = exp((m_prev - m) * scale_bf16) (ELWSUB, the
// SFPU multiply, the accurate fp32 exp: EXP_APPROX_MODE on), packed bf16;
// sum_prev *= alpha, sum += sum_prev (Float32, tile-wide); out += out_prev *
// alpha by L1 accumulation in bf16.
void rescale(const Job& j, const float* m_prev, const float* m, const float* sum_prev, const float* out_prev,
             const TileMath& tm, Scratch& s, float* sum, float* out) {
  for (int64_t r = 0; r < j.QC; ++r) {
    const float d = fpu_add(m_prev[r], -m[r], true, tm.arch);
    // EXP_APPROX_MODE on: _ckernel_sfpu_exp_accurate_; off: the polynomial.
    const float alpha = pack_bf16(j.cfg.exp_approx_mode
                                      ? sfpu_exp_lane(sfpu_mul(d, j.scale_bf16, tm.arch), ExpAlgorithm::AccurateFp32, tm.arch)
                                      : exp_poly(d, j.scale_bf16, true, tm.arch));
    float sp[kTile], cur[kTile];
    for (int64_t c = 0; c < kTile; ++c) sp[c] = tf32(sum_prev[r * kTile + c]), cur[c] = tf32(sum[r * kTile + c]);
    if (tm.kern) tm.kern->elwmul(sp, &alpha, 0, kTile, tm.phases, true, sp);
    else for (int64_t c = 0; c < kTile; ++c) sp[c] = fpu_mul(sp[c], alpha, tm.fidelity, true, tm.arch);
    pack_dst(sp, sp, kTile, DataFormat::Float32, true, PackSrc::Float32);
    for (float& x : sp) x = tf32(x);
    if (tm.kern) tm.kern->elwadd(cur, sp, 1, kTile, true, cur);
    else for (int64_t c = 0; c < kTile; ++c) cur[c] = fpu_add(cur[c], sp[c], true, tm.arch);
    pack_dst(cur, sum + r * kTile, kTile, DataFormat::Float32, true, PackSrc::Float32);
    s.row.resize(static_cast<size_t>(j.VD));
    float* x = s.row.data();
    if (tm.kern) tm.kern->elwmul(out_prev + r * j.VD, &alpha, 0, j.VD, tm.phases, true, x);
    else for (int64_t c = 0; c < j.VD; ++c) x[c] = fpu_mul(out_prev[r * j.VD + c], alpha, tm.fidelity, true, tm.arch);
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

void normalize(const Job& j, int64_t bh, int64_t q_low, const float* sum, const float* acc, const TileMath& tm,
               Scratch& s, TileTensor& out) {
  const ComputeConfig& cc = j.cfg.compute;
  std::vector<float> ls(static_cast<size_t>(j.QC)), row(static_cast<size_t>(j.VD));
  reduce_sums(j, sum, tm, s, ls.data());
  for (int64_t r = 0; r < j.QC; ++r) {
    const float l = ls[static_cast<size_t>(r)];
    const float inv = pack_f32(sfpu_reciprocal_legacy(tf32(pack_f32(l)), cc.math_approx_mode, true, tm.arch));
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
  const int64_t q_low = qc * j.QC, q_tile = q_low / kTile, kct = j.KC / kTile;
  const int64_t q_high_tile = j.cfg.is_causal ? std::min(q_tile + j.QC / kTile, j.Skt) : j.Skt;
  const int64_t k_end = (q_high_tile + kct - 1) / kct;
  s.S.resize(static_cast<size_t>(j.QC * j.KC));
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
    std_matmul(s.S.data(), j.KC, j.QC, j.KC, true, j.v.matrix(kvh) + k_low * j.VD, j.VD, 1, j.VD, tm, s.mm, o, j.VD);
    for (int64_t i = 0; i < j.QC * j.VD; ++i) o[i] = pack_bf16(o[i]);
    if (kc > 0)
      rescale(j, s.m[prev].data(), s.m[cur].data(), s.sum[prev].data(), s.out[prev].data(), tm, s, s.sum[cur].data(), o);
    prev = cur;
  }
  normalize(j, bh, q_low, s.sum[prev].data(), s.out[prev].data(), tm, s, out);
}

Job make_job(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
             const SdpaConfig& cfg) {
  const std::string p = sdpa_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const std::string gap = sdpa_standard_gap(q, cfg);
  if (!gap.empty()) throw InputError("sdpa: " + gap);
  // The factory's default scale: 1/sqrt of the padded head dim, in float32.
  const float scale = cfg.scale.value_or(1.0f / std::sqrt(static_cast<float>(q.pcols)));
  return Job{q, k, v, mask, cfg, q.shape[1], k.shape[1], q.pcols, v.pcols, cfg.q_chunk_size, cfg.k_chunk_size,
             k.rows / kTile, scale, sdpa_truncate_bf16(scale)};
}

}  // namespace

std::string sdpa_standard_gap(const TileTensor& q, const SdpaConfig& cfg) {
  const std::string at = " at tt_metal latest with fp32_dest_acc_en";
  if (cfg.sliding_window_size > 0) return "sliding_window_size is not modelled" + at;
  if (!cfg.attention_sink.empty()) return "attention_sink is not modelled" + at;
  if (q.format == DataFormat::Float32) return "a float32 Q is not modelled" + at;
  return "";
}

int64_t sdpa_standard_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                               const SdpaConfig& cfg) {
  const int64_t sq = cfg.q_chunk_size / kTile, sk = cfg.k_chunk_size / kTile, dht = q.pcols / kTile;
  const int64_t vdht = v.pcols / kTile, bf16 = tile_bytes(DataFormat::Bfloat16), f32 = tile_bytes(DataFormat::Float32);
  int64_t b = sq * dht * tile_bytes(q.format) * 2 + sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format)) * 2;
  if (mask) b += sq * sk * tile_bytes(mask->format) * 2;
  else if (cfg.is_causal) b += 2 * bf16;  // the lightweight palette: -inf, diagonal
  b += sq * sk * f32 + 2 * sq * f32;        // qk_im, sum_A/B
  b += 2 * sq * vdht * bf16 + 3 * sq * bf16 + 2 * bf16;  // out_im_A/B, max_A/B, exp_max_diff, identities
  return b + sq * vdht * tile_bytes(cfg.compute.output);
}

void tt_sdpa_standard_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                             TileTensor& out, const SdpaConfig& cfg) {
  tt_sdpa_standard(q, k, v, mask, out, cfg, Exec{simd::Isa::Scalar, nullptr});
}

void tt_sdpa_standard(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      TileTensor& out, const SdpaConfig& cfg, const Exec& ex) {
  const Job j = make_job(q, k, v, mask, cfg);
  const ComputeConfig& cc = cfg.compute;
  const TileMath tm(cc.math_fidelity, true, cc.math_approx_mode, ex.kernels(cc.arch), cc.arch);
  out = make_tile_tensor(q.shape, cc.output);
  const int64_t heads = q.shape[0] * j.NQH, nqc = q.rows / j.QC;
  std::vector<Scratch> scratch(static_cast<size_t>(std::max(1, ex.threads())));
  ex.parallel_for(heads * nqc, [&](int64_t t, int th) { q_chunk(j, t / nqc, t % nqc, tm, scratch[static_cast<size_t>(th)], out); });
}

}  // namespace mha::ttsim
