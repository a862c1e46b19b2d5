// The streaming kernel's steps (compute_streaming.hpp at d2ed8d9b,
// sdpa_inner_loop_step and normalize_row_streaming), one q chunk at a time.
// docs/TTSIM.md, "SDPA prefill at tt_metal latest: the streaming kernel",
// lists them in order.
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/ttsim/ops/sdpa/sdpa_window.h"
#include "tensor/half.h"
#include "ttsim/kblock.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"

namespace mha::ttsim {

namespace {

// The packer adding n values (a multiple of 32) onto bf16 ones in L1.
void l1acc(float* l1, const float* x, int64_t n, const TileMath& tm) {
  if (tm.kern) {
    tm.kern->l1_acc_bf16(l1, x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) l1[i] = l1_acc_bf16(l1[i], x[i]);
  }
}

// ELWMUL of n values (SrcA) by one broadcast column value s (SrcB), left in
// Dst (the caller packs).
void mul_bcast_dst(const float* x, int64_t n, float s, const TileMath& tm, float* out) {
  if (tm.kern) {
    tm.kern->elwmul(x, &s, 0, n, tm.phases, tm.fp32, out);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = fpu_mul(x[i], s, tm.fidelity, tm.fp32, tm.arch);
  }
}

// pack(ELWMUL(x, s)) of n CB values into tmp, or x itself where that is
// what the packer writes: on the vector path, s == 1.0 at two phases or
// more on a 16-bit Dst gives back the values KernelTable::times_one_keeps takes (the
// first two phases take SrcA's hidden bit and ten more, and 1.0 has no low
// piece in SrcB; TtsimSdpaStreaming.TimesOneKeepsBf16Values checks every
// bf16 value on the lane model). The running max seldom moves after the
// first k chunks, so most rows rescale by exactly 1.
const float* times_col(const float* x, int64_t n, float s, const TileMath& tm, float* tmp) {
  if (s == 1.0f && tm.kern && tm.phases >= 2 && !tm.fp32 && tm.kern->times_one_keeps(x, n)) return x;
  mul_bcast_dst(x, n, s, tm, tmp);
  sdpa_pack_bf16(tmp, n, tm);
  return tmp;
}

// t with `rows` rows and `cols` columns: its values (with `tile_padding`,
// the padding its last tiles carry too), zeros below, `fill` right of them
// (the reader's -inf over a mask's padded key tiles).
TileTensor pad_rows(const TileTensor& t, int64_t rows, int64_t cols, float fill = 0.0f, bool tile_padding = false) {
  const int64_t vr = tile_padding ? t.prows : t.rows, vc = tile_padding ? t.pcols : t.cols;
  Shape s = t.shape;
  s[2] = rows;
  s[3] = cols;
  TileTensor p = make_tile_tensor(s, t.format);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t r = 0; r < p.rows; ++r) {
      if (r < vr) std::memcpy(&p.at(b, r, 0), t.matrix(b) + r * t.pcols, 4 * static_cast<size_t>(vc));
      for (int64_t c = vc; c < cols; ++c) p.at(b, r, c) = fill;
    }
  return p;
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The lightweight masks and a given mask, added to the chunk's scores by L1
// accumulation of whole tiles: a -inf tile above the causal diagonal and
// on padded key tiles, the diagonal tile (0 on and below the diagonal, -inf
// above) where a row tile meets its key tile, a given mask everywhere.
// Non-causal keys ending inside a tile (k_partial_col = s_k % 32) stamp the
// writer's partial tile there (fill_vertical_tile_bf16: 0 left of the
// column, -inf from it); causal masks those keys by its diagonal. A
// sliding window adds its stamps (sdpa_window.h) on the same tiles.
void mask_chunk(const StreamingRun& r, int64_t bh, int64_t q_low, int64_t k_low, StreamingWork& w) {
  const int64_t KC = r.KC, kt_valid = (r.in.s_k + kTile - 1) / kTile, partial_col = r.in.s_k % kTile;
  const float* given = nullptr;
  if (r.in.has_mask) {
    const TileTensor& m = r.in.mask;
    given = m.matrix(m.shape[1] == 1 ? bh / r.NQH : bh) + k_low;
  }
  for (int64_t i = 0; i < r.QC; ++i) {
    const int64_t qp = r.chunk_start + q_low + i, qt = qp / kTile;  // the row's sequence position
    for (int64_t t = 0; t < KC / kTile; ++t) {
      const int64_t kt = k_low / kTile + t;
      float* x = &w.S[static_cast<size_t>(i * KC + t * kTile)];
      if (given) {
        l1acc(x, given + (q_low + i) * r.in.mask.pcols + t * kTile, kTile, r.tm);
        continue;
      }
      const bool neginf = r.cfg.is_causal ? kt > qt : kt >= kt_valid;
      const bool diag = r.cfg.is_causal && kt == qt;
      const bool partial = !r.cfg.is_causal && partial_col > 0 && kt == kt_valid - 1;
      const bool window = sdpa_window_stamps_tile(r.cfg, qt, kt);
      if (!neginf && !diag && !partial && !window) continue;
      for (int64_t c = 0; c < kTile; ++c)
        w.row[static_cast<size_t>(c)] = neginf || (diag && c > qp % kTile) || (partial && c >= partial_col) ||
                                                (window && sdpa_window_stamp_masks(r.cfg, qt, kt, qp % kTile, c))
                                            ? kNegInf
                                            : 0.0f;
      l1acc(x, w.row.data(), kTile, r.tm);
    }
  }
}

// The row max over the unscaled scores fused with the running max
// (reduce_c_row_group: the previous max copied into Dst, the block reduce
// taking the max onto it), then sub_exp_block_bcast_cols: ELWSUB of the max,
// the scaled exp under the packer's ReLU, the exps packed back in place and
// L1-accumulated tile by tile into the row's sum tile.
void softmax_rows(const StreamingRun& r, bool first, StreamingWork& w) {
  const int64_t KC = r.KC;
  for (int64_t i = 0; i < r.QC; ++i) {
    float* x = &w.S[static_cast<size_t>(i * KC)];
    float m = sdpa_row_max(x, KC);
    if (!first) m = std::max(m, w.m_prev[static_cast<size_t>(i)]);
    w.m_cur[static_cast<size_t>(i)] = m;
    const float neg = -m;
    if (r.tm.kern) {
      r.tm.kern->elwadd(x, &neg, 0, KC, r.tm.fp32, x);
    } else {
      for (int64_t j = 0; j < KC; ++j) x[j] = fpu_add(x[j], neg, r.tm.fp32, r.tm.arch);
    }
    sdpa_streaming_score_exps(x, KC, r.scale, r.tm.kern, r.tm.arch);
    sdpa_pack_bf16(x, KC, r.tm);
    float* sum = &w.sum_cur[static_cast<size_t>(i * kTile)];
    std::memcpy(sum, x, 4 * kTile);  // the row's first tile overwrites
    for (int64_t t = 1; t < KC / kTile; ++t) l1acc(sum, x + t * kTile, kTile, r.tm);
  }
}

// O_cur = P @ V_chunk (all the chunk's keys in Dst), except that with one
// tile row per subblock the first row group splits its keys over the qk
// subblocks, each part packed and summed in L1 (the kernel overlaps them
// with the last row group's exps).
void pv_chunk(const StreamingRun& r, int64_t kvh, int64_t k_low, StreamingWork& w) {
  const float* V = r.in.v.matrix(kvh) + k_low * r.DV;
  // P's rows [row0, row0 + rows) by V's keys [k0, k0 + inner) of the chunk.
  auto matmul = [&](int64_t row0, int64_t rows, int64_t k0, int64_t inner, float* dst) {
    const float* P = w.S.data() + row0 * r.KC + k0;
    if (r.vd)
      sdpa_matmul_decoded(P, r.KC, rows, inner, (*r.vd)[static_cast<size_t>(kvh)], k_low + k0, 0, r.DV, r.tm, w.s,
                          dst, r.DV);
    else
      sdpa_matmul(P, r.KC, rows, inner, V + k0 * r.DV, r.DV, 1, r.DV, r.tm, w.s, dst, r.DV);
  };
  int64_t row0 = 0;
  if (r.plan.sbh == 1 && r.plan.kt_num_subblocks > 1) {
    const int64_t w_keys = r.plan.qkt_subblock_w * kTile;
    for (int64_t p = 0; p < r.plan.kt_num_subblocks; ++p) {
      const int64_t k0 = p * w_keys;
      matmul(0, kTile, k0, std::min(w_keys, r.KC - k0), p == 0 ? w.o_cur.data() : w.tmp.data());
      if (p > 0) l1acc(w.o_cur.data(), w.tmp.data(), kTile * r.DV, r.tm);
    }
    row0 = kTile;
  }
  if (row0 < r.QC) matmul(row0, r.QC - row0, 0, r.KC, w.o_cur.data() + row0 * r.DV);
}

// S = Q_chunk @ K_chunk^T, packed. The fast path decoded Q (w.qrec) and
// K^T once; each output element is the same Dst accumulation either way.
void qk_chunk(const StreamingRun& r, int64_t bh, int64_t kvh, int64_t q_low, int64_t k_low, StreamingWork& w) {
  if (r.kt) {
    const simd::In1 kt = (*r.kt)[static_cast<size_t>(kvh)].view(k_low / r.KC * r.D, 0);  // the chunk's block
    sdpa_mvmul(w.qrec.data(), r.QC, r.D, kt, r.KC, r.tm, w.S.data(), r.KC);
    sdpa_pack_bf16(w.S.data(), r.QC * r.KC, r.tm);
    return;
  }
  sdpa_matmul(r.in.q.matrix(bh) + q_low * r.D, r.D, r.QC, r.D, r.in.k.matrix(kvh) + k_low * r.D, 1, r.D, r.KC, r.tm,
              w.s, w.S.data(), r.KC);
}

// The SALAD corrections: alpha = exp((m_prev - m_cur) * scale) on the first
// column, then sum_cur += sum_prev * alpha and O_cur += O_prev * alpha, each
// product packed and added by L1 accumulation.
void rescale(const StreamingRun& r, StreamingWork& w) {
  for (int64_t i = 0; i < r.QC; ++i) {
    const size_t u = static_cast<size_t>(i);
    // exp_tile_first_column<EXP_APPROX_MODE> hands the flag to an LLK body
    // that takes the accurate exp when it is true: inverted (PR #56925).
    float a = sdpa_streaming_alpha_exp(fpu_add(w.m_prev[u], -w.m_cur[u], r.tm.fp32, r.tm.arch), r.scale_bf16,
                                       !r.cfg.exp_approx_mode, r.tm.arch);
    sdpa_pack_bf16(&a, 1, r.tm);
    l1acc(&w.sum_cur[u * kTile], times_col(&w.sum_prev[u * kTile], kTile, a, r.tm, w.tmp.data()), kTile, r.tm);
    l1acc(&w.o_cur[u * r.DV], times_col(&w.o_prev[u * r.DV], r.DV, a, r.tm, w.tmp.data()), r.DV, r.tm);
  }
}

// The attention sink as normalize_row_streaming folds it into the reduced
// row sum l (Dst tile 0): the reader's one sink tile (the head's logit,
// broadcast as a scalar) is subtracted from the row's final running max
// (sub_tiles_bcast_scalar: m - sink into the 16-bit Dst), exp_tile_first_column
// takes it with the scale negated (exp((sink - m) * scale_bf16), the
// rescale's exp and its inverted flag), and add_binary_tile adds it to l on
// the SFPU (SFPADD, stored to the 16-bit Dst). The sink joins neither the
// max nor O: it only enlarges the denominator.
float add_sink(const StreamingRun& r, float sink, float m, float l) {
  const Arch a = r.tm.arch;
  const float e = sdpa_streaming_alpha_exp(fpu_add(m, -sink, r.tm.fp32, a), -r.scale_bf16, !r.cfg.exp_approx_mode, a);
  return sfpu_store(sfpu_add(l, e, a), r.tm.fp32);
}

// normalize_row_streaming: the row sum as one matmul of the sum tile (in0)
// against the column-identity tile, the sink (add_sink), the reciprocal on
// the first column in Dst (recip_tile_first_column: _reciprocal_compat_
// with 1 Newton step in approx mode, 2 and a round to bf16 otherwise, i.e.
// sfpu_reciprocal_legacy on this generation's SFPU), packed to the 1-tile
// scratch buffer; then O * bcast_cols(1/sum) packed to the output buffer.
void normalize(const StreamingRun& r, int64_t bh, int64_t q_low, StreamingWork& w) {
  sdpa_matmul(w.sum_cur.data(), kTile, r.QC, kTile, w.ident.data(), kTile, 1, kTile, r.tm, w.s, w.tmp.data(), kTile);
  const ComputeConfig& cc = r.cfg.compute;
  const int64_t rows = std::min(r.QC, r.out->rows - q_low);
  const std::vector<float>& sinks = r.cfg.attention_sink;
  for (int64_t i = 0; i < rows; ++i) {
    float l = w.tmp[static_cast<size_t>(i * kTile)];
    if (!sinks.empty()) l = add_sink(r, sinks[static_cast<size_t>(bh % r.NQH)], w.m_prev[static_cast<size_t>(i)], l);
    const float inv = sdpa_recip1(l, r.tm);
    float* o = &w.o_cur[static_cast<size_t>(i * r.DV)];
    mul_bcast_dst(o, r.DV, inv, r.tm, o);
    pack_from_dst(o, r.out->matrix(bh) + (q_low + i) * r.out->pcols, r.DV, cc.output, r.tm.fp32,
                  cc.bfp8_pack_precise);
  }
}

// tt-llk PR #1190's Schraudolph without input clamping: t = A*scale*d +
// (B-C) on the SFPU (the multiply-add below), rounded to a signed 16-bit
// integer (saturating at 32767, so inputs above about 0.72/scale give
// exp(0.72)), shifted into the exponent with SETSGN giving the integer's
// sign. Below about -88/scale t is negative and the packer's ZERO_RELU
// makes the result +0 (as it does -0). The scores here are at most the
// row max, so in practice this is the clamped exp's non-negative branch.
constexpr float kExpBias = 32500.818359375f;
float score_exp_a(float scale) { return 256.0f * 1.4426950408889634f * scale; }

}  // namespace

float sdpa_streaming_score_exp(float d, float scale, Arch arch) {
  const float t = sfpu_mad(score_exp_a(scale), d, kExpBias, arch);
  if (!(t > 0.0f)) return 0.0f;  // negative (or a NaN sum): ReLU
  const uint32_t i = t >= 32767.0f ? 32767u : static_cast<uint32_t>(std::floor(static_cast<double>(t) + 0.5));
  const uint32_t bits = (i << 15) & 0xffff0000u;  // SFPSTORE to the 16-bit Dst
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

void sdpa_streaming_score_exps(float* x, int64_t n, float scale, const simd::KernelTable* kern, Arch arch) {
  const float a = score_exp_a(scale);
  int64_t i = 0;
  if (kern && std::isfinite(a)) {
    uint32_t av[32], cv[32], t[32];
    std::fill(av, av + 32, f32_bits(a));
    std::fill(cv, cv + 32, f32_bits(kExpBias));
    for (; i + 32 <= n; i += 32) {
      // mad_finite's domain: finite operands, a product well inside FP32
      // (a masked -inf score, a NaN, a huge one: the lane model's 32).
      bool ok = true;
      for (int j = 0; j < 32; ++j) ok &= std::fabs(static_cast<double>(a) * x[i + j]) < 1e37;
      if (!ok) {
        for (int j = 0; j < 32; ++j) x[i + j] = sdpa_streaming_score_exp(x[i + j], scale, arch);
        continue;
      }
      kern->mad_finite(av, reinterpret_cast<const uint32_t*>(x + i), cv, 32, t);
      kern->score_exp_store(reinterpret_cast<const float*>(t), x + i, 32);
    }
  }
  for (; i < n; ++i) x[i] = sdpa_streaming_score_exp(x[i], scale, arch);
}

float sdpa_streaming_alpha_exp(float d, float scale_bf16, bool approximate, Arch arch) {
  const float x = sfpu_mul(d, scale_bf16, arch);  // val * s2vFloat16b(scale)
  if (approximate) return sfpu_store(x < -42.0f ? 0.0f : sfpu_exp_lane(x, ExpAlgorithm::Approx, arch), false);
  return sfpu_store(sfpu_exp_lane(x, ExpAlgorithm::Accurate21f, arch), false);
}

std::vector<std::string> sdpa_streaming_flag_notes(const SdpaConfig& cfg) {
  std::vector<std::string> notes;
  if (!cfg.exp_approx_mode)
    notes.push_back("exp_approx_mode=false does not reach the score exp at tt_metal latest (tt-metal #56710)");
  notes.push_back(std::string("exp_approx_mode=") + (cfg.exp_approx_mode ? "true" : "false") +
                  " gives the " + (cfg.exp_approx_mode ? "accurate" : "approximate") +
                  " rescale exp at tt_metal latest: the flag is inverted there (tt-metal PR #56925)");
  return notes;
}

StreamingInputs streaming_pad(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                              const SdpaConfig& cfg) {
  StreamingInputs in;
  const int64_t psq = round_up(q.rows, cfg.q_chunk_size), psk = round_up(k.rows, cfg.k_chunk_size);
  in.q = pad_rows(q, psq, q.cols);
  // A float32 Q (scalar_df Float32 at 15a15bf5) reaches the QK matmul as
  // the unpacker puts it in Src: TF32 with an fp32 Dst, bf16 with a 16-bit
  // one (truncated, denormals flushed); the values are cut here once.
  if (q.format == DataFormat::Float32)
    for (float& x : in.q.data) x = unpack_to_src(x, DataFormat::Float32, cfg.compute.fp32_dest_acc_en);
  in.k = pad_rows(k, psk, k.cols);
  in.v = pad_rows(v, psk, v.cols);
  in.s_k = k.rows;
  if (mask) {
    in.has_mask = true;
    in.mask = pad_rows(*mask, psq, psk, kNegInf, true);
  }
  return in;
}

std::string sdpa_padded_mask_note(const SdpaConfig& cfg, int64_t s_k, bool has_mask) {
  if (cfg.compute.tt_metal != TtMetal::Latest || !has_mask || s_k % kTile == 0) return "";
  const std::string first = std::to_string(s_k), last = std::to_string(round_up(s_k, kTile) - 1);
  return "keys " + first + "-" + last + " (K's tile padding, score 0; V 0) join the softmax with the mask's tile " +
         "padding (0) at tt_metal latest: a given mask gets -inf only on whole padded key tiles (tt-metal #54833)";
}

float sdpa_latest_scale(const SdpaConfig& cfg, const TileTensor& q) {
  return cfg.scale.value_or(1.0f / std::sqrt(static_cast<float>(q.pcols)));
}

StreamingRun streaming_run(const StreamingInputs& in, const SdpaConfig& cfg, const simd::KernelTable* kern,
                           TileTensor& out, int64_t chunk_start) {
  const ComputeConfig& cc = cfg.compute;
  StreamingRun r{in, cfg, TileMath(cc.math_fidelity, cc.fp32_dest_acc_en, cc.math_approx_mode, kern, cc.arch),
                 sdpa_streaming_plan(cfg)};
  // The rescale exp takes the scale's top 16 bits (scale_fp32 >> 16).
  r.scale = sdpa_latest_scale(cfg, in.q);
  r.scale_bf16 = sdpa_truncate_bf16(r.scale);
  r.NQH = in.q.shape[1];
  r.NKH = in.k.shape[1];
  r.D = in.q.pcols;
  r.DV = in.v.pcols;
  r.QC = cfg.q_chunk_size;
  r.KC = cfg.k_chunk_size;
  r.out = &out;
  r.chunk_start = chunk_start;
  return r;
}

void streaming_q_chunk(const StreamingRun& r, int64_t bh, int64_t qc, StreamingWork& w) {
  const int64_t QC = r.QC, KC = r.KC, q_low = qc * QC;
  const int64_t kvh = (bh / r.NQH) * r.NKH + (bh % r.NQH) / (r.NQH / r.NKH);
  w.S.resize(static_cast<size_t>(QC * KC));
  for (auto* b : {&w.sum_prev, &w.sum_cur}) b->resize(static_cast<size_t>(QC * kTile));
  for (auto* b : {&w.o_prev, &w.o_cur, &w.tmp}) b->resize(static_cast<size_t>(QC * std::max(r.DV, kTile)));
  for (auto* b : {&w.m_prev, &w.m_cur}) b->resize(static_cast<size_t>(QC));
  w.row.resize(kTile);
  w.ident.assign(static_cast<size_t>(kTile * kTile), 0.0f);
  for (int64_t k = 0; k < kTile; ++k) w.ident[static_cast<size_t>(k * kTile)] = 1.0f;  // column 0 of ones
  // A causal q chunk visits the k chunks up to its last row's diagonal
  // (chunked: at its sequence position, the q chunk offset added); a
  // window narrows the range to the chunks it reaches.
  const SdpaKRange kr =
      sdpa_streaming_k_range(r.cfg, (r.chunk_start + q_low) / kTile, QC / kTile, KC / kTile, r.in.k.rows / KC);
  if (r.kt) {
    w.qrec.resize(static_cast<size_t>(QC * r.D * r.tm.phases));
    detail::decode_in0(r.in.q.matrix(bh) + q_low * r.D, r.D, QC, r.D, DataFormat::Bfloat16, r.tm.fp32, r.tm.phases,
                       w.qrec.data());
  }
  for (int64_t kc = kr.begin; kc < kr.end; ++kc) {
    const int64_t k_low = kc * KC;
    qk_chunk(r, bh, kvh, q_low, k_low, w);
    mask_chunk(r, bh, q_low, k_low, w);
    softmax_rows(r, kc == kr.begin, w);
    pv_chunk(r, kvh, k_low, w);
    if (kc > kr.begin) rescale(r, w);
    std::swap(w.m_prev, w.m_cur);
    std::swap(w.sum_prev, w.sum_cur);
    std::swap(w.o_prev, w.o_cur);
  }
  std::swap(w.sum_prev, w.sum_cur);  // the last chunk's state
  std::swap(w.o_prev, w.o_cur);
  normalize(r, bh, q_low, w);
}

}  // namespace mha::ttsim
