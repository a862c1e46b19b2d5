// What both flash kernel instances share (cpu_flash_kernel.h): packing, mask
// geometry, dropout, the final normalisation, the scratch, and the run-time
// choice of instance. Built with the baseline AVX2+FMA flags only.
#include "backends/cpu/cpu_flash.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_flash_kernel.h"
#include "model/dropout.h"

namespace mha::cpu {

namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

namespace flash_detail {

// src holds flattened rows from row0 on; rows past S: the bias row, or
// zeros for add_zero_attn and padding; zero columns past d keep the tiles
// from reading garbage.
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

void load_source_rows(const FlashArgs& a, bool value, int64_t b, int64_t g, int64_t j0, int64_t n, float* dst, int64_t ldl) {
  const int64_t real = std::max<int64_t>(0, std::min(n, a.S - j0));
  if (real > 0) a.rows->load(a.rows->self, value, b, g, j0, real, dst, ldl);
  if (real < n) std::memset(dst + real * ldl, 0, sizeof(float) * (n - real) * ldl);
}

KvBlock kv_block(const FlashArgs& a, int64_t b, int64_t g, int64_t j0, int64_t nkp, int64_t dvp, float* kl, float* vl) {
  const int64_t dh = a.dh, dv = a.dv;
  KvBlock kv{kl, dh, vl, dvp};
  if (!a.rows) {
    load_rows(a.k, a.ldk, a.kv_row0, a.bias_k, b, a.S, g, dh, j0, nkp, kl, dh);
    load_rows(a.v, a.ldv, a.kv_row0, a.bias_v, b, a.S, g, dv, j0, nkp, vl, dvp);
    return kv;
  }
  // Keys in place only when every row the score tile reads (padding rows
  // too) is a stored row. Values are copied all the same: on the session's
  // Intel Xeon P.V ran 7 % slower on the cache's rows than on the copy,
  // which cost more than copying them.
  int64_t row_bytes = 0;
  if (a.rows->floats && j0 + nkp <= a.S)
    kv.k = static_cast<const float*>(a.rows->locate(a.rows->self, false, b, g, j0, &row_bytes)), kv.ldk = dh;
  else
    load_source_rows(a, false, b, g, j0, nkp, kl, dh);
  // Values that are the in-place keys' first columns (MLA's latent rows) are
  // read where they are: the score tile has just brought those rows into
  // cache, and a copy took ~10 % of an MLA decode block.
  if (kv.k != kl && dv == dvp) {
    int64_t vb = 0;
    const void* v = a.rows->locate(a.rows->self, true, b, g, j0, &vb);
    if (v == kv.k && vb % static_cast<int64_t>(sizeof(float)) == 0) {
      kv.v = static_cast<const float*>(v), kv.ldv = vb / static_cast<int64_t>(sizeof(float));
      return kv;
    }
  }
  load_source_rows(a, true, b, g, j0, nkp, vl, dvp);
  return kv;
}

void kv_rows_ahead(const FlashArgs& a, int64_t b, int64_t g, int64_t j0, int64_t n, KvAhead* ahead) {
  *ahead = KvAhead{};
  const int64_t rows = std::max<int64_t>(0, std::min(n, a.S - j0));
  if (rows == 0) return;
  for (int value = 0; value < 2; ++value) {
    RowStream& r = ahead->s[value];
    if (a.rows) {
      if (!a.rows->locate) return;
      int64_t row_bytes = 0;
      r.p = static_cast<const char*>(a.rows->locate(a.rows->self, value, b, g, j0, &row_bytes));
      r.bytes = rows * row_bytes, r.stride = 0, r.rows = 1;  // back to back: one run of lines
    } else {
      const float* base = value ? a.v : a.k;
      const int64_t ld = value ? a.ldv : a.ldk, d = value ? a.dv : a.dh;
      r.p = reinterpret_cast<const char*>(base + (b * a.S + j0 - a.kv_row0) * ld + g * d);
      const int64_t f = sizeof(float);
      r.bytes = d * f, r.stride = ld * f, r.rows = rows;
    }
    // Lines are whole: start at the line holding the first byte.
    const int64_t skew = reinterpret_cast<std::uintptr_t>(r.p) % 64;
    r.p -= skew, r.bytes += skew;
  }
}

bool visible_lanes(const MaskRule& rule, int64_t i0, int64_t j0, int64_t nk, int64_t nkp, int64_t nql, int32_t* lo,
                   int32_t* hi) {
  bool cut = false;
  for (int64_t j = 0; j < nkp; ++j) {
    const int64_t jj = j0 + j;
    const int64_t l0 = std::max<int64_t>(0, rule.first_query(jj) - i0);
    const int64_t h0 = j >= nk ? 0 : std::min<int64_t>(nql, rule.end_query(jj) - i0);
    lo[j] = static_cast<int32_t>(std::min<int64_t>(l0, nql));
    hi[j] = static_cast<int32_t>(std::max<int64_t>(std::min<int64_t>(h0, nql), lo[j]));
    if (j < nk) cut |= lo[j] > 0 || hi[j] < nql;
  }
  return cut;
}

void pack_mask(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t j0, int64_t nq, int64_t nql, int64_t nk,
               int64_t nkp, float* mt) {
  const int64_t mb = a.mask_b == 1 ? 0 : b, mh = a.mask_h == 1 ? 0 : h;
  const float* mbase = a.mask + (mb * a.mask_h + mh) * a.mask_l * a.St;
  const int64_t mask_ld = a.mask_l == 1 ? 0 : a.St;  // 0: every query adds the one row
  for (int64_t ii = 0; ii < nql; ++ii) {
    const float* mrow = mbase + (i0 + ii) * mask_ld + j0;
    for (int64_t j = 0; j < nkp; ++j) mt[j * kBr + ii] = ii < nq && j < nk ? mrow[j] * kLog2e : 0.0f;
  }
}

void apply_dropout(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t j0, int64_t nq, int64_t nk, float* st) {
  for (int64_t j = 0; j < nk; ++j)
    for (int64_t ii = 0; ii < nq; ++ii) {
      const uint64_t flat = static_cast<uint64_t>(((b * a.H + h) * a.L + i0 + ii) * a.St + j0 + j);
      if (!dropout_keep(a.dropout_seed, flat, a.dropout_p)) st[j * kBr + ii] = 0.0f;
    }
}

void load_state(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, float* o, int64_t ldo, float* m,
                float* l) {
  for (int64_t ii = 0; ii < kBr; ++ii) {
    const int64_t row = b * a.q_stride() + i0 + ii - a.q_row0;
    float* dst = o + ii * ldo;
    std::fill(dst, dst + ldo, 0.0f);
    if (ii >= nq) {
      m[ii] = -std::numeric_limits<float>::infinity(), l[ii] = 0.0f;
      continue;
    }
    std::memcpy(dst, a.ctx + row * a.ldc + h * a.dv, sizeof(float) * a.dv);
    m[ii] = a.state_m[row * a.H + h];
    l[ii] = a.state_l[row * a.H + h];
  }
}

void store_state(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, const float* o, int64_t ldo,
                 const float* m, const float* l) {
  for (int64_t ii = 0; ii < nq; ++ii) {
    const int64_t row = b * a.q_stride() + i0 + ii - a.q_row0;
    std::memcpy(a.ctx + row * a.ldc + h * a.dv, o + ii * ldo, sizeof(float) * a.dv);
    a.state_m[row * a.H + h] = m[ii];
    a.state_l[row * a.H + h] = l[ii];
  }
}

void write_context(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, const float* o, int64_t ldo,
                   const float* l) {
  // p >= 1 drops everything; scale 0 keeps that a zero rather than 0 * inf.
  const float keep_scale = !a.dropout ? 1.0f : a.dropout_p >= 1.0 ? 0.0f : static_cast<float>(1.0 / (1.0 - a.dropout_p));
  const int64_t dv = a.dv;
  for (int64_t ii = 0; ii < nq; ++ii) {
    // A row whose keys are all masked has l = 0: NaN, as torch's softmax
    // gives; with no keys at all the context is an empty sum, 0, as in the
    // reference.
    const float inv = l[ii] > 0.0f ? keep_scale / l[ii] : a.St == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    float* dst = a.ctx + (b * a.q_stride() + i0 + ii - a.q_row0) * a.ldc + h * dv;
    const float* src = o + ii * ldo;
    // One IEEE multiply per value: the compiler's vectorised loop gives the
    // same bits as any hand-written one.
    for (int64_t d = 0; d < dv; ++d) dst[d] = src[d] * inv;
  }
}

}  // namespace flash_detail

void FlashScratch::resize(int64_t dh, int64_t dv) {
  const int64_t dvp = round_up(dv, flash_detail::kMaxTileWidth);
  const int64_t n = kHeadsPerTask;
  qt.assign(n * dh * kBr, 0.0f);
  st.assign(kBc * kBr, 0.0f);
  mt.assign(kBc * kBr, 0.0f);
  kl.assign(kBc * dh, 0.0f);
  vl.assign(kBc * dvp, 0.0f);
  o.assign(n * kBr * dvp, 0.0f);
  m.assign(n * kBr, 0.0f);
  l.assign(n * kBr, 0.0f);
  alpha.assign(n * kBr, 0.0f);
}

int64_t flash_query_blocks(int64_t L) { return (L + kBr - 1) / kBr; }

int64_t flash_head_sets(int64_t H, int64_t Hkv) { return Hkv * ((H / Hkv + kHeadsPerTask - 1) / kHeadsPerTask); }

const vec::ByIsa<FlashKernel>& flash_kernels() {
  static const vec::ByIsa<FlashKernel> k = [] {
    vec::ByIsa<FlashKernel> b;
    b.at[static_cast<int>(vec::Isa::Avx2)] = flash_block_avx2;
    b.at[static_cast<int>(vec::Isa::Avx512)] = flash_block_avx512;
    return b;
  }();
  return k;
}

bool flash_isa_available(vec::Isa isa) { return flash_kernels().pick(isa) != nullptr; }
FlashKernel flash_kernel(vec::Isa isa) { return flash_kernels().pick(isa); }
const char* flash_kernel_isa(vec::Isa isa) { return vec::isa_name(flash_kernels().pick_isa(isa)); }

void flash_block(const FlashArgs& a, int64_t b, int64_t hs, int64_t qb, FlashScratch& s) {
  flash_kernel(a.isa)(a, b, hs, qb, s);
}

}  // namespace mha::cpu
