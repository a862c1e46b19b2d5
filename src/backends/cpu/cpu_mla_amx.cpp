// MLA decode attention on AMX tiles (cpu_mla_amx.h), built with the amx
// extension's flags (src/vec/isa_levels.def): latent_amx runs only after
// vec::cpu_has_amx() confirmed the CPU and the OS's grant of the tile state.
//
// Tile registers: 0-3 accumulate a 2x2 block of 16x16 float tiles, 4-5 hold
// its two A tiles and 6-7 its two B tiles, so every tile load feeds two
// TDPBF16PS. A B tile holds dword pairs: row r, column n is (B[2r][n],
// B[2r+1][n]) as bfloat16, the lower half first.
// GCC 12's unmasked AVX-512 shuffles pass its _mm512_undefined_* (a
// self-initialised variable) as the masked form's source, which -Wall
// reports from inside <immintrin.h> (as in cpu_decode_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "backends/cpu/cpu_mla_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "util/aligned_vector.h"
#include "vec/lanes_avx512.h"

namespace mha::cpu {

namespace {

using V = vec::F32x16;
constexpr int64_t kKeys = 128;  // keys per block: four key tile pairs of scores, four K steps of P.V
constexpr int kPieces = 3;
constexpr int64_t kRange = 3;  // K steps of 32 dims per pass of the scores over a block's keys

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  _tile_loadconfig(&c);
}

// Per-thread buffers, reused across calls (the pool's threads live as long
// as the session).
struct Scratch {
  AlignedVector<uint32_t> qp;    // [nhp/32][dh/32][kPieces][2] B tiles: Q^T's pieces, a head tile pair's in a row
  AlignedVector<float> st;       // [2][nhp/16][kKeys][16] scores (S^T) of a block and the next, per head tile
  AlignedVector<uint32_t> pa;    // [nhp/32][kKeys/32][kPieces][2] A tiles: P's pieces, a head tile pair's in a row
  AlignedVector<uint32_t> cv;    // [dv/32][kKeys/32][2] B tiles: value rows paired, a column tile pair's in a row
  AlignedVector<float> acc;      // [nhp/16][dv/16] 16x16 float tiles: unnormalised context
  AlignedVector<uint16_t> tail;  // [kKeys][dh] the last partial block, zero padded
  AlignedVector<float> m, l;     // [nhp] running max (log2 units), row sum
  AlignedVector<uint32_t> pairs;  // [kPieces][16][16] one head tile's probability pairs for 32 keys
};
thread_local Scratch tls;

// Touches the next block's rows into L2 at an even pace over a block's
// tile products (scores and P.V), `per` bytes per product: a burst of
// prefetches holds the fill buffers the tile loads from L2 need.
struct RowPrefetch {
  const char* p = nullptr;
  const char* end = nullptr;
  int64_t per = 0, owed = 0;
  void tick(int64_t products) {
    owed += products * per;
    for (; owed >= 64 && p < end; owed -= 64, p += 64) _mm_prefetch(p, _MM_HINT_T1);
  }
};

// The 2x2 block of tile products both passes run: accumulators 0-3 +=
// A tiles 4, 5 (rows) times B tiles 6, 7 (columns).
[[gnu::always_inline]] inline void products_2x2() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// The three truncated bfloat16 pieces of 16 floats, each as the float whose
// low 16 bits are zero (x = p[0] + p[1] + p[2] exactly).
[[gnu::always_inline]] inline void split3(__m512 x, __m512i p[kPieces]) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  p[0] = _mm512_and_si512(_mm512_castps_si512(x), hi);
  const __m512 r1 = _mm512_sub_ps(x, _mm512_castsi512_ps(p[0]));
  p[1] = _mm512_and_si512(_mm512_castps_si512(r1), hi);
  p[2] = _mm512_castps_si512(_mm512_sub_ps(r1, _mm512_castsi512_ps(p[1])));
}

// Dword pairs (a's bfloat16 low, b's high) of two pieces.
[[gnu::always_inline]] inline __m512i pair(__m512i a, __m512i b) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  return _mm512_or_si512(_mm512_and_si512(b, hi), _mm512_srli_epi32(a, 16));
}

// r[i] <- column i of the 16x16 dword matrix r.
void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 8] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 4], 0x88);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 8], t[i + 12], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 4], 0xdd);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 8], t[i + 12], 0xdd);
  }
}

// Q^T's pieces as B tiles: tile (ht, c, i) row r, column n pairs dims
// 32c + 2r, 32c + 2r + 1 of head 16 ht + n (zero past nh).
void pack_queries(const LatentAmxTask& t, int64_t nhp, Scratch& s) {
  const int64_t nc = t.dh / 32, nht = nhp / 16;
  s.qp.resize(kPieces * nc * nht * 256);
  const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int64_t ht = 0; ht < nht; ++ht)
    for (int64_t c = 0; c < nc; ++c) {
      __m512i rows[kPieces][16];
      for (int n = 0; n < 16; ++n) {
        const int64_t h = ht * 16 + n;
        __m512i lo[kPieces], hi[kPieces];
        const float* q = t.q + h * t.dh + c * 32;
        split3(h < t.nh ? _mm512_loadu_ps(q) : _mm512_setzero_ps(), lo);
        split3(h < t.nh ? _mm512_loadu_ps(q + 16) : _mm512_setzero_ps(), hi);
        for (int i = 0; i < kPieces; ++i) rows[i][n] = _mm512_permutex2var_epi16(lo[i], odd, hi[i]);
      }
      for (int i = 0; i < kPieces; ++i) {
        transpose16(rows[i]);
        uint32_t* dst = s.qp.data() + (((ht / 2 * nc + c) * kPieces + i) * 2 + ht % 2) * 256;
        for (int r = 0; r < 16; ++r) _mm512_store_si512(dst + r * 16, rows[i][r]);
      }
    }
}

// One block's vector work: its value rows (the first dv columns of rows c,
// ldc elements apart) paired into B tiles (tile (ks, vt) row r pairs keys
// 32 ks + 2r and 32 ks + 2r + 1 of columns 16 vt ..), first, while the
// rows are still in L2 from the block's score products (left for last,
// they were read back from further out: ~0.5 ms of ~20 per token); then
// its online softmax over the scores S^T [kKeys, nhp] at st (n valid
// keys), which leaves the probabilities' pieces as A tiles (tile (i, ht,
// ks) row r holds keys 32 ks .. 32 ks + 31 of head 16 ht + r). It is cut
// into small steps that the next block's score products run between their
// tile instructions, so the vector ports work while the tile unit does.
struct BlockWork {
  const LatentAmxTask& t;
  Scratch& s;
  const float* st;
  const uint16_t* c;
  int64_t ldc, n, nhp;
  // Per head tile: the max and rescale, then 4 steps of 8 keys per 32.
  static constexpr int64_t kHeadSteps = 1 + kKeys / 32 * 4;

  int64_t steps() const { return nhp / 16 * kHeadSteps + kKeys / 2; }
  void step(int64_t u) {
    if (u < kKeys / 2) return pair_values(u);
    u -= kKeys / 2;
    if (u % kHeadSteps == 0) return rescale(u / kHeadSteps);
    const int64_t q = u % kHeadSteps - 1;
    probabilities(u / kHeadSteps, q / 4, q % 4);
  }

  // The new running max of head tile ht; the sum and the accumulator rows
  // of heads whose max rose rescaled (PV of the blocks before has run).
  void rescale(int64_t ht) const {
    const int64_t nvt = t.dv / 16;
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t k = 0; k < n; ++k) mx = _mm512_max_ps(mx, _mm512_load_ps(st + (ht * kKeys + k) * 16));
    // c1 > 0: the max of the scaled scores is the scaled max.
    const __m512 m_old = _mm512_load_ps(s.m.data() + ht * 16);
    const __m512 m_new = _mm512_max_ps(m_old, _mm512_mul_ps(mx, _mm512_set1_ps(t.c1)));
    const __m512 alpha = vec::exp2_nonpositive<V>(_mm512_sub_ps(m_old, m_new));
    _mm512_store_ps(s.l.data() + ht * 16, _mm512_mul_ps(_mm512_load_ps(s.l.data() + ht * 16), alpha));
    _mm512_store_ps(s.m.data() + ht * 16, m_new);
    const __mmask16 moved = _mm512_cmp_ps_mask(alpha, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ);
    for (int r = 0; r < 16; ++r)
      if ((moved >> r) & 1) {
        const __m512 a = _mm512_set1_ps(alpha[r]);
        for (int64_t vt = 0; vt < nvt; ++vt) {
          float* row = s.acc.data() + (ht * nvt + vt) * 256 + r * 16;
          _mm512_store_ps(row, _mm512_mul_ps(_mm512_load_ps(row), a));
        }
      }
  }

  // Keys 32 ks + 8 q .. + 7 of head tile ht: their probabilities into the
  // sum and, as pieces, into dword pairs; the last step of the 32 keys
  // transposes the pairs into the A tiles.
  void probabilities(int64_t ht, int64_t ks, int64_t q) const {
    const __m512 c1 = _mm512_set1_ps(t.c1), m = _mm512_load_ps(s.m.data() + ht * 16);
    __m512 l = _mm512_load_ps(s.l.data() + ht * 16);
    for (int64_t kk = q * 4; kk < q * 4 + 4; ++kk) {
      __m512i even[kPieces], odd[kPieces];
      for (int e = 0; e < 2; ++e) {
        const int64_t k = ks * 32 + 2 * kk + e;
        __m512 p = _mm512_setzero_ps();
        if (k < n) p = vec::exp2_nonpositive<V>(_mm512_fmsub_ps(_mm512_load_ps(st + (ht * kKeys + k) * 16), c1, m));
        l = _mm512_add_ps(l, p);
        split3(p, e ? odd : even);
      }
      for (int i = 0; i < kPieces; ++i) _mm512_store_si512(s.pairs.data() + (i * 16 + kk) * 16, pair(even[i], odd[i]));
    }
    _mm512_store_ps(s.l.data() + ht * 16, l);
    if (q < 3) return;
    for (int i = 0; i < kPieces; ++i) {
      __m512i d[16];
      for (int r = 0; r < 16; ++r) d[r] = _mm512_load_si512(s.pairs.data() + (i * 16 + r) * 16);
      transpose16(d);
      uint32_t* dst = s.pa.data() + (((ht / 2 * (kKeys / 32) + ks) * kPieces + i) * 2 + ht % 2) * 256;
      for (int r = 0; r < 16; ++r) _mm512_store_si512(dst + r * 16, d[r]);
    }
  }

  // Row pair r of keys 32 ks .. into the value tiles.
  void pair_values(int64_t u) const {
    const int64_t nvt = t.dv / 16, ks = u / 16, r = u % 16;
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const uint16_t* a = c + (ks * 32 + 2 * r) * ldc;
    for (int64_t vp = 0; vp < nvt / 2; ++vp) {
      const __m512i x = _mm512_loadu_si512(a + vp * 32), y = _mm512_loadu_si512(a + ldc + vp * 32);
      uint32_t* dst = s.cv.data() + (vp * (kKeys / 32) + ks) * 512 + r * 16;
      _mm512_store_si512(dst, _mm512_permutex2var_epi16(x, lo, y));
      _mm512_store_si512(dst + 256, _mm512_permutex2var_epi16(x, hi, y));
    }
  }
};

// S^T [kKeys, nhp] into st for the block at rows c (ldc elements apart)
// against the packed queries, running the previous block's vector work
// (when there is one) between the tile products; touches the next block's
// rows into L2 (pf). Per head tile pair, kRange K steps at a time over all
// the block's keys: those steps' query tiles (18 KB) stay in L1 for the
// four key tile pairs, where a pass of all K steps per key pair read each
// query tile from L2 four times (the tile loads' L2 traffic, not the
// products, set the pace); the accumulators go through st between passes.
void block_scores(const LatentAmxTask& t, const uint16_t* c, int64_t ldc, int64_t nhp, Scratch& s, float* st,
                  BlockWork* work, RowPrefetch& pf) {
  const int64_t nc = t.dh / 32, nht = nhp / 16, stride = ldc * 2;
  int64_t u = 0;
  const int64_t steps = work ? work->steps() : 0;
  for (int64_t hp = 0; hp < nht / 2; ++hp)
    for (int64_t k0 = 0; k0 < nc; k0 += kRange)
      for (int64_t kp = 0; kp < kKeys / 32; ++kp) {
        float* d = st + (hp * 2 * kKeys + kp * 32) * 16;
        if (k0 == 0) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
        } else {
          _tile_loadd(0, d, 64);
          _tile_loadd(1, d + kKeys * 16, 64);
          _tile_loadd(2, d + 256, 64);
          _tile_loadd(3, d + kKeys * 16 + 256, 64);
        }
        const uint16_t* a = c + kp * 32 * ldc;
        for (int64_t k = k0; k < std::min(nc, k0 + kRange); ++k) {
          _tile_loadd(4, a + k * 32, stride);
          _tile_loadd(5, a + 16 * ldc + k * 32, stride);
          for (int i = 0; i < kPieces; ++i) {
            const uint32_t* b = s.qp.data() + ((hp * nc + k) * kPieces + i) * 512;
            _tile_loadd(6, b, 64);
            _tile_loadd(7, b + 256, 64);
            products_2x2();
          }
          if (u < steps) work->step(u++);
          pf.tick(4 * kPieces);
        }
        _tile_stored(0, d, 64);
        _tile_stored(1, d + kKeys * 16, 64);
        _tile_stored(2, d + 256, 64);
        _tile_stored(3, d + kKeys * 16 + 256, 64);
      }
  while (u < steps) work->step(u++);
}

// acc += P . V over the block, 2x2 tiles at a time. pa and cv hold each
// pass's tiles in the order it reads them: sequential streams from L2 cost
// the tile loads a tenth less than tiles a head or column tile apart.
void block_pv(const LatentAmxTask& t, int64_t nhp, Scratch& s, RowPrefetch& pf) {
  const int64_t nht = nhp / 16, nvt = t.dv / 16, nks = kKeys / 32;
  for (int64_t hp = 0; hp < nht / 2; ++hp)
    for (int64_t vp = 0; vp < nvt / 2; ++vp) {
      float* o = s.acc.data() + (hp * 2 * nvt + vp * 2) * 256;
      _tile_loadd(0, o, 64);
      _tile_loadd(1, o + 256, 64);
      _tile_loadd(2, o + nvt * 256, 64);
      _tile_loadd(3, o + nvt * 256 + 256, 64);
      for (int64_t ks = 0; ks < nks; ++ks) {
        const uint32_t* b = s.cv.data() + (vp * nks + ks) * 512;
        _tile_loadd(6, b, 64);
        _tile_loadd(7, b + 256, 64);
        for (int i = 0; i < kPieces; ++i) {
          const uint32_t* a = s.pa.data() + ((hp * nks + ks) * kPieces + i) * 512;
          _tile_loadd(4, a, 64);
          _tile_loadd(5, a + 256, 64);
          products_2x2();
        }
      }
      pf.tick(4 * kPieces * nks);
      _tile_stored(0, o, 64);
      _tile_stored(1, o + 256, 64);
      _tile_stored(2, o + nvt * 256, 64);
      _tile_stored(3, o + nvt * 256 + 256, 64);
    }
}

}  // namespace

bool latent_amx_fits(int64_t dh, int64_t dv) { return dh > 0 && dv > 0 && dh % 32 == 0 && dv % 32 == 0 && dv <= dh; }

void latent_amx(const LatentAmxTask& t) {
  Scratch& s = tls;
  const int64_t nhp = (t.nh + kLatentAmxHeads - 1) / kLatentAmxHeads * kLatentAmxHeads;
  const int64_t nht = nhp / 16, nvt = t.dv / 16;
  configure_tiles();
  pack_queries(t, nhp, s);
  s.st.resize(2 * kKeys * nhp);
  s.pairs.resize(kPieces * 16 * 16);
  s.pa.resize(kPieces * nht * (kKeys / 32) * 256);
  s.cv.resize((kKeys / 32) * nvt * 256);
  s.acc.assign(nht * nvt * 256, 0.0f);
  s.m.assign(nhp, -std::numeric_limits<float>::infinity());
  s.l.assign(nhp, 0.0f);
  // Block j's scores are taken while block j - 1's value pairs and softmax
  // run between their tile products; then block j - 1's P.V.
  const int64_t blocks = (t.S + kKeys - 1) / kKeys;
  const uint16_t* prev = nullptr;
  // A block's products: its scores' and the previous block's P.V.
  RowPrefetch pf;
  const int64_t products = nht / 2 * kKeys / 32 * (t.dh / 32 + t.dv / 32) * 4 * kPieces;
  pf.per = (kKeys * t.row_elems * 2 + products - 1) / products;
  for (int64_t j = 0; j <= blocks; ++j) {
    const int64_t j0 = j * kKeys, n = std::min(kKeys, t.S - j0);
    float* st = s.st.data() + (j & 1) * kKeys * nhp;
    std::optional<BlockWork> work;
    if (j > 0)
      work.emplace(BlockWork{t, s, s.st.data() + ((j - 1) & 1) * kKeys * nhp, prev, prev == s.tail.data() ? t.dh : t.row_elems,
                             std::min(kKeys, t.S - j0 + kKeys), nhp});
    if (j == blocks) {
      for (int64_t u = 0; u < work->steps(); ++u) work->step(u);
    } else {
      const uint16_t* c = t.rows + j0 * t.row_elems;
      int64_t ldc = t.row_elems;
      if (n < kKeys) {  // the tile loads read whole blocks: the last one from a zero-padded copy
        s.tail.assign(kKeys * t.dh, 0);
        for (int64_t k = 0; k < n; ++k) std::memcpy(s.tail.data() + k * t.dh, c + k * ldc, t.dh * 2);
        c = s.tail.data(), ldc = t.dh;
      }
      const int64_t next = std::min(kKeys, std::max<int64_t>(0, t.S - j0 - kKeys));
      pf.p = next > 0 ? reinterpret_cast<const char*>(t.rows + (j0 + kKeys) * t.row_elems) : nullptr;
      pf.end = next > 0 ? pf.p + next * t.row_elems * 2 : nullptr, pf.owed = 0;
      block_scores(t, c, ldc, nhp, s, st, work ? &*work : nullptr, pf);
      prev = c;
    }
    if (j > 0) block_pv(t, nhp, s, pf);
  }
  _tile_release();
  if (t.m) std::copy(s.m.begin(), s.m.begin() + t.nh, t.m), std::copy(s.l.begin(), s.l.begin() + t.nh, t.l);
  for (int64_t h = 0; h < t.nh; ++h) {
    const __m512 inv = _mm512_set1_ps(t.m ? 1.0f : 1.0f / s.l[h]);
    for (int64_t vt = 0; vt < nvt; ++vt) {
      const float* a = s.acc.data() + ((h / 16) * nvt + vt) * 256 + (h % 16) * 16;
      _mm512_storeu_ps(t.ctx + h * t.dv + vt * 16, _mm512_mul_ps(_mm512_load_ps(a), inv));
    }
  }
}

}  // namespace mha::cpu
