// The SDPA oracle: tt-metal's sdpa.cpp loop nest written out one (q chunk,
// k chunk) pair at a time on the scalar lane models (docs/TTSIM.md, "SDPA").
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ttsim/packer.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"
#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "util/error.h"

namespace mha::ttsim {

void tt_sdpa_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                    TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start) {
  const std::string p = sdpa_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg, chunk_start);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const int64_t B = q.shape[0], NQH = q.shape[1], NKH = k.shape[1], D = q.pcols, DV = v.pcols;
  const int64_t Sq = q.rows, Sk = k.rows, QC = cfg.q_chunk_size, KC = cfg.k_chunk_size;
  const ComputeConfig& cc = cfg.compute;
  const TileMath tm(cc.math_fidelity, cc.fp32_dest_acc_en, cc.math_approx_mode, nullptr, cc.arch);
  const float scale = sdpa_scale_bf16(cfg, q.cols);
  out = make_tile_tensor(sdpa_out_shape(q, v), cc.output);
  SdpaScratch s;
  std::vector<float> S(static_cast<size_t>(QC * KC)), O(static_cast<size_t>(QC * DV)), acc(O.size()), mrow(KC);
  std::vector<float> m_prev(QC), m_cur(QC), l_prev(QC), l_cur(QC);
  for (int64_t nb = 0; nb < B; ++nb)
    for (int64_t nq = 0; nq < NQH; ++nq) {
      const int64_t bh = nb * NQH + nq, kvh = nb * NKH + nq / (NQH / NKH);
      for (int64_t qc = 0; qc < Sq / QC; ++qc) {
        // q_low: the sequence position (chunked: q_chunk += chunked_q_chunk_offset).
        const int64_t q_row = qc * QC, q_low = chunk_start + q_row, q_high = cfg.is_causal ? q_low + QC : Sk;
        const float* Q = q.matrix(bh) + q_row * D;
        for (int64_t kc = 0; kc * KC < q_high; ++kc) {
          const int64_t k_low = kc * KC, k_high = k_low + KC;
          // QK = Q_chunk @ K_chunk^T (the matmul's transpose flag), QK *= scale.
          sdpa_matmul(Q, D, QC, D, k.matrix(kvh) + k_low * D, 1, D, KC, tm, s, S.data(), KC);
          for (int64_t r = 0; r < QC; ++r) sdpa_mul_bcast(&S[r * KC], KC, scale, tm);
          // QK += mask: the causal mask on chunks that reach the diagonal, else the given mask.
          // (With a sliding window, every chunk gets the generated mask.)
          if (sdpa_chunk_masked(cfg, q_low, k_high, mask != nullptr)) {
            if (!mask) {
              for (int64_t r = 0; r < QC; ++r) {
                sdpa_mask_row(cfg, q_low + r, k_low, KC, mrow.data());
                sdpa_add(&S[r * KC], mrow.data(), KC, tm);
              }
            } else {
              const int64_t mh = mask->shape[1] == 1 ? nb : bh;
              for (int64_t r = 0; r < QC; ++r) sdpa_add(&S[r * KC], mask->matrix(mh) + (q_low + r) * mask->pcols + k_low, KC, tm);
            }
          }
          for (int64_t r = 0; r < QC; ++r) {
            m_cur[r] = sdpa_row_max(&S[r * KC], KC);
            if (kc > 0) m_cur[r] = std::max(m_cur[r], m_prev[r]);
            sdpa_sub_exp(&S[r * KC], KC, m_cur[r], true, tm);
          }
          sdpa_row_sums(S.data(), KC, QC, KC, tm, s, l_cur.data());
          // OUT_IM = P @ V_chunk; the first chunk's goes straight to the accumulator.
          sdpa_matmul(S.data(), KC, QC, KC, v.matrix(kvh) + k_low * DV, DV, 1, DV, tm, s, O.data(), DV);
          if (kc == 0) {
            acc = O;
            l_prev = l_cur;
          } else {
            for (int64_t r = 0; r < QC; ++r) {
              const float alpha = sdpa_sub_exp1(m_prev[r], m_cur[r], cfg.exp_approx_mode, tm);
              l_prev[r] = sdpa_add1(l_cur[r], sdpa_mul1(l_prev[r], alpha, tm), tm);
              sdpa_mul_bcast(&acc[r * DV], DV, alpha, tm);
              sdpa_add(&acc[r * DV], &O[r * DV], DV, tm);
            }
          }
          m_prev = m_cur;
        }
        // The attention sink, a virtual key chunk of one key per row with no
        // value: m = max(m, sink); alpha = exp(m_old - m); sum = exp(sink - m)
        // + sum * alpha; OUT_ACC *= alpha.
        if (!cfg.attention_sink.empty()) {
          const float sink = sdpa_mul1(cfg.attention_sink[static_cast<size_t>(nq)], scale, tm);
          for (int64_t r = 0; r < QC; ++r) {
            m_cur[r] = std::max(m_prev[r], sink);
            const float alpha = sdpa_sub_exp1(m_prev[r], m_cur[r], cfg.exp_approx_mode, tm);
            const float e = sdpa_sub_exp1(sink, m_cur[r], true, tm);  // the chunk exps' approx exp
            l_prev[r] = sdpa_add1(e, sdpa_mul1(l_prev[r], alpha, tm), tm);
            sdpa_mul_bcast(&acc[r * DV], DV, alpha, tm);
          }
        }
        // OUT = OUT_ACC * (1 / sum), then copied to the output's format.
        for (int64_t r = 0; r < QC; ++r) {
          sdpa_mul_bcast(&acc[r * DV], DV, sdpa_recip1(l_prev[r], tm), tm);
          pack_from_dst(&acc[r * DV], out.matrix(bh) + (q_row + r) * DV, DV, cc.output, cc.fp32_dest_acc_en, cc.bfp8_pack_precise);
        }
      }
    }
}

}  // namespace mha::ttsim
