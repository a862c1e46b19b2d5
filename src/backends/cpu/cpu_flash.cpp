#include "backends/cpu/cpu_flash.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_simd.h"
#include "model/dropout.h"

namespace mha::cpu {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// dst[c * ldd + r] = src[r * lds + c] for an 8x8 block.
inline void transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
         r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
         r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// qt[d * kBr + ii] = q row ii, column d, for ii < nq; zero for ii in [nq, nql).
void pack_qt(const float* q, int64_t ldq, int64_t nq, int64_t nql, int64_t dh, float* qt) {
  const int64_t full_rows = nq / 8 * 8, full_cols = dh / 8 * 8;
  for (int64_t r = 0; r < full_rows; r += 8)
    for (int64_t d = 0; d < full_cols; d += 8) transpose8x8(q + r * ldq + d, ldq, qt + d * kBr + r, kBr);
  for (int64_t ii = 0; ii < nql; ++ii)
    for (int64_t d = ii < full_rows ? full_cols : 0; d < dh; ++d) qt[d * kBr + ii] = ii < nq ? q[ii * ldq + d] : 0.0f;
}

// Copies key or value rows [j0, j0 + n) of kv head g (src holds flattened
// rows from row0 on) into a dense [n, ldl]
// block: rows past S take the bias row (index S) or zeros (add_zero_attn and
// padding), columns past d are zero so 16-wide tiles read no garbage.
void load_rows(const float* src, int64_t ld, int64_t row0, const float* bias, int64_t b, int64_t S, int64_t g,
               int64_t d, int64_t j0, int64_t n, float* dst, int64_t ldl) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t jj = j0 + j;
    float* out = dst + j * ldl;
    const float* row = jj < S ? src + (b * S + jj - row0) * ld + g * d : (jj == S && bias ? bias + g * d : nullptr);
    if (row)
      std::memcpy(out, row, sizeof(float) * d);
    else
      std::memset(out, 0, sizeof(float) * d);
    if (ldl > d) std::memset(out + d, 0, sizeof(float) * (ldl - d));
  }
}

}  // namespace

void FlashScratch::resize(int64_t dh, int64_t dv) {
  const int64_t dvp = round_up(dv, 16);
  qt.assign(dh * kBr, 0.0f);
  st.assign(kBc * kBr, 0.0f);
  mt.assign(kBc * kBr, 0.0f);
  kl.assign(kBc * dh, 0.0f);
  vl.assign(kBc * dvp, 0.0f);
  o.assign(kBr * dvp, 0.0f);
  m.assign(kBr, 0.0f);
  l.assign(kBr, 0.0f);
  alpha.assign(kBr, 0.0f);
}

int64_t flash_query_blocks(int64_t L) { return (L + kBr - 1) / kBr; }

// Shapes: Q block [nq <= kBr, dh] -> qt [dh, kBr]; per key block of nk <= kBc
// rows: st = kl [nk, dh] . qt -> [nk, kBr] (lanes = queries, so the softmax
// max/sum run down columns with plain vertical SIMD), then o [kBr, dv] +=
// st^T . vl [nk, dv]. Scores are kept in log2 units (scale * log2 e folded
// in once) so each exponential is a bare exp2 of a difference.
void flash_block(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s) {
  const int64_t g = h / (a.H / a.Hkv);
  const int64_t i0 = qb * kBr, nq = std::min(kBr, a.L - i0);
  const int64_t nql = std::min(kBr, round_up(nq, 48));  // lanes computed: whole 16-lane and 6-row tiles
  const int64_t dh = a.dh, dv = a.dv, dvp = round_up(dv, 16);

  float* qt = s.qt.data();
  pack_qt(a.q + (b * a.L + i0 - a.q_row0) * a.ldq + h * dh, a.ldq, nq, nql, dh, qt);
  std::fill(s.o.begin(), s.o.end(), 0.0f);
  std::fill(s.m.begin(), s.m.end(), -kInf);
  std::fill(s.l.begin(), s.l.end(), 0.0f);

  // Keys outside [j_lo, j_hi) are masked for every query of the block: skip them.
  const int64_t j_lo = a.rule.first_key(i0), j_hi = a.rule.end_key(i0 + nq, a.St);
  const float c1 = a.scale * kLog2e;
  const float* mbase = nullptr;
  if (a.mask) {
    const int64_t mb = a.mask_b == 1 ? 0 : b, mh = a.mask_h == 1 ? 0 : h;
    mbase = a.mask + (mb * a.mask_h + mh) * a.mask_l * a.St;
  }
  const int64_t mask_ld = a.mask_l == 1 ? 0 : a.St;  // 0: every query adds the one row
  float* st = s.st.data();
  float* mt = s.mt.data();
  float* o = s.o.data();
  int32_t lo[kBc], hi[kBc];

  for (int64_t j0 = j_lo; j0 < j_hi; j0 += kBc) {
    const int64_t nk = std::min(kBc, j_hi - j0), nkp = round_up(nk, 6);
    // Key rows are read in place (the score tile broadcasts them, any row
    // stride will do) unless the block runs past S; value rows are copied
    // so the P.V tile streams a dense, zero-padded block.
    const float* kb = a.k + (b * a.S + j0 - a.kv_row0) * a.ldk + g * dh;
    int64_t ldkb = a.ldk;
    if (j0 + nkp > a.S) {
      load_rows(a.k, a.ldk, a.kv_row0, a.bias_k, b, a.S, g, dh, j0, nkp, s.kl.data(), dh);
      kb = s.kl.data(), ldkb = dh;
    }
    load_rows(a.v, a.ldv, a.kv_row0, a.bias_v, b, a.S, g, dv, j0, nkp, s.vl.data(), dvp);

    for (int64_t r = 0; r < nkp; r += 6)
      for (int64_t c = 0; c < nql; c += 16) tile_6x16(dh, kb + r * ldkb, ldkb, 1, qt + c, kBr, st + r * kBr + c, kBr, false);

    // Lanes [lo[j], hi[j]) of key row j survive the causal / window / padding masks.
    bool geometry = false;
    for (int64_t j = 0; j < nkp; ++j) {
      const int64_t jj = j0 + j;
      const int64_t l0 = std::max<int64_t>(0, a.rule.first_query(jj) - i0);
      const int64_t h0 = j >= nk ? 0 : std::min<int64_t>(nql, a.rule.end_query(jj) - i0);
      lo[j] = static_cast<int32_t>(std::min<int64_t>(l0, nql));
      hi[j] = static_cast<int32_t>(std::max<int64_t>(std::min<int64_t>(h0, nql), lo[j]));
      geometry |= lo[j] > 0 || hi[j] < nql;
    }
    if (mbase) {
      for (int64_t ii = 0; ii < nql; ++ii) {
        const float* mrow = mbase + (i0 + ii) * mask_ld + j0;
        for (int64_t j = 0; j < nkp; ++j) mt[j * kBr + ii] = ii < nq && j < nk ? mrow[j] * kLog2e : 0.0f;
      }
    }

    const __m256 vc1 = _mm256_set1_ps(c1), vninf = _mm256_set1_ps(-kInf), vzero = _mm256_setzero_ps();
    bool rescale = false;
    // Blocks with neither a mask nor a geometric cut keep raw scores: the
    // max of raw scores times c1 > 0 is the max of scaled ones (rounding is
    // monotonic), and each exponent becomes one fused s*c1 - max, saving a
    // multiply and a store per score. j runs two rows at a time into two
    // accumulators so the max / sum chains do not serialise on latency.
    const bool raw = !mbase && !geometry && c1 > 0.0f;
    const __m256 vmul = raw ? vc1 : _mm256_set1_ps(1.0f);
    for (int64_t c = 0; c < nql; c += 8) {
      __m256 mxa = vninf, mxb = vninf;
      if (raw) {
        for (int64_t j = 0; j < nkp; j += 2) {
          mxa = _mm256_max_ps(mxa, _mm256_loadu_ps(st + j * kBr + c));
          mxb = _mm256_max_ps(mxb, _mm256_loadu_ps(st + (j + 1) * kBr + c));
        }
        mxa = _mm256_mul_ps(_mm256_max_ps(mxa, mxb), vc1);
      } else {
        const __m256i lane = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(c)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int64_t j = 0; j < nkp; ++j) {
          float* p = st + j * kBr + c;
          __m256 x = _mm256_mul_ps(_mm256_loadu_ps(p), vc1);
          if (mbase) x = _mm256_add_ps(x, _mm256_loadu_ps(mt + j * kBr + c));
          if (geometry && (lo[j] > c || hi[j] < c + 8)) {
            const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo[j] - 1)),
                                                  _mm256_cmpgt_epi32(_mm256_set1_epi32(hi[j]), lane));
            x = _mm256_blendv_ps(vninf, x, _mm256_castsi256_ps(keep));
          }
          _mm256_storeu_ps(p, x);
          if (j & 1)
            mxb = _mm256_max_ps(mxb, x);
          else
            mxa = _mm256_max_ps(mxa, x);
        }
        mxa = _mm256_max_ps(mxa, mxb);
      }
      const __m256 mold = _mm256_loadu_ps(s.m.data() + c);
      const __m256 mnew = _mm256_max_ps(mold, mxa);
      // A lane with every key so far masked keeps max -inf; subtracting 0
      // instead keeps its exponentials at exp2(-inf) = 0 rather than NaN.
      const __m256 msafe = _mm256_blendv_ps(mnew, vzero, _mm256_cmp_ps(mnew, vninf, _CMP_EQ_OQ));
      const __m256 alpha = exp2_ps(_mm256_sub_ps(mold, msafe));
      _mm256_storeu_ps(s.m.data() + c, mnew);
      _mm256_storeu_ps(s.alpha.data() + c, alpha);
      rescale |= _mm256_movemask_ps(_mm256_cmp_ps(alpha, _mm256_set1_ps(1.0f), _CMP_NEQ_UQ)) != 0;
      __m256 suma = vzero, sumb = vzero;
      for (int64_t j = 0; j < nkp; j += 2) {
        float* p = st + j * kBr + c;
        const __m256 ea = exp2_ps(_mm256_fmsub_ps(_mm256_loadu_ps(p), vmul, msafe));
        const __m256 eb = exp2_ps(_mm256_fmsub_ps(_mm256_loadu_ps(p + kBr), vmul, msafe));
        _mm256_storeu_ps(p, ea);
        _mm256_storeu_ps(p + kBr, eb);
        suma = _mm256_add_ps(suma, ea);
        sumb = _mm256_add_ps(sumb, eb);
      }
      _mm256_storeu_ps(s.l.data() + c,
                       _mm256_fmadd_ps(_mm256_loadu_ps(s.l.data() + c), alpha, _mm256_add_ps(suma, sumb)));
    }
    if (rescale)
      for (int64_t ii = 0; ii < nql; ++ii) {
        if (s.alpha[ii] == 1.0f) continue;
        const __m256 al = _mm256_set1_ps(s.alpha[ii]);
        for (int64_t d = 0; d < dvp; d += 8) _mm256_storeu_ps(o + ii * dvp + d, _mm256_mul_ps(_mm256_loadu_ps(o + ii * dvp + d), al));
      }
    if (a.dropout) {
      // The row sum above already holds the undropped weights: dropout acts
      // on normalised weights, exactly as the reference applies it.
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t ii = 0; ii < nq; ++ii) {
          const uint64_t flat = static_cast<uint64_t>(((b * a.H + h) * a.L + i0 + ii) * a.St + j0 + j);
          if (!dropout_keep(a.dropout_seed, flat, a.dropout_p)) st[j * kBr + ii] = 0.0f;
        }
    }
    for (int64_t r = 0; r < nql; r += 6)
      for (int64_t c = 0; c < dvp; c += 16)
        tile_6x16(nkp, st + r, 1, kBr, s.vl.data() + c, dvp, o + r * dvp + c, dvp, true);
  }

  // p >= 1 drops everything; scale 0 keeps that a zero rather than 0 * inf.
  const float keep_scale = !a.dropout ? 1.0f : a.dropout_p >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - a.dropout_p));
  for (int64_t ii = 0; ii < nq; ++ii) {
    // A row whose keys are all masked has l = 0: NaN, as torch's softmax
    // gives; with no keys at all the context is an empty sum, 0, as in the
    // reference.
    const float inv = s.l[ii] > 0.0f ? keep_scale / s.l[ii] : a.St == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    float* dst = a.ctx + (b * a.L + i0 + ii - a.q_row0) * a.ldc + h * dv;
    const float* src = o + ii * dvp;
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t d = 0;
    for (; d + 8 <= dv; d += 8) _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(src + d), vinv));
    for (; d < dv; ++d) dst[d] = src[d] * inv;
  }
}

}  // namespace mha::cpu
