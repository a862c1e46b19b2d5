#pragma once
// The flash block kernel per ISA. The algorithm (cpu_flash_kernel.inc) is
// compiled twice: cpu_flash_avx2.cpp (8-float vectors, 6x16 tiles) and
// cpu_flash_avx512.cpp (16-float vectors, 8x48 and 12x32 tiles), each with its
// level's flags (src/vec/isa_levels.def). flash_kernel() picks one through
// the project's dispatch (src/vec/isa.h), so the binary runs on any x86-64
// with AVX2 and FMA.
//
// The helpers below hold the scalar and layout work both kernels share
// (packing, mask geometry, dropout, the final normalisation). They are
// compiled once, in cpu_flash.cpp with the baseline flags, so that no inline
// function is ever compiled with two different instruction sets.
#include <cstdint>

#include "backends/cpu/cpu_flash.h"

namespace mha::cpu {

using FlashKernel = void (*)(const FlashArgs&, int64_t b, int64_t h, int64_t qb, FlashScratch&);
void flash_block_avx2(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s);
void flash_block_avx512(const FlashArgs& a, int64_t b, int64_t h, int64_t qb, FlashScratch& s);
// The instances by level. flash_kernel: the widest this CPU runs at
// `isa`'s vector width, and flash_kernel_isa its name ("avx512" or "avx2");
// flash_isa_available: whether there is one.
const vec::ByIsa<FlashKernel>& flash_kernels();
FlashKernel flash_kernel(vec::Isa isa = vec::best_isa());
const char* flash_kernel_isa(vec::Isa isa = vec::best_isa());
bool flash_isa_available(vec::Isa isa);

namespace flash_detail {

constexpr int64_t kMaxTileWidth = 32;  // the widest P.V tile: dv is padded to a multiple of its width

// Rows [j0, j0 + n) of kv head g of batch b into a dense [n, ldl] block:
// rows past S take the bias row (index S) or zeros, columns past d are zero.
void load_rows(const float* src, int64_t ld, int64_t row0, const float* bias, int64_t b, int64_t S, int64_t g,
               int64_t d, int64_t j0, int64_t n, float* dst, int64_t ldl);
// load_rows for a FlashRowSource: rows [j0, j0 + n) through a.rows, rows
// at or past S zero (block padding).
void load_source_rows(const FlashArgs& a, bool value, int64_t b, int64_t g, int64_t j0, int64_t n, float* dst, int64_t ldl);
// Rows [j0, j0 + nkp) of kv head g of batch b as the tiles read them:
// keys [nkp, dh] at k (ldk floats apart), values [nkp, dvp] at v (ldv =
// dvp). The keys of a row source that stores float32 rows (a float32 KV
// cache) are read in place; all others are copied into the dense,
// zero-padded kl [nkp, dh] and vl [nkp, dvp], widened from the cache's
// format or taken from the projections, whose rows are H*d floats apart,
// often a multiple of 4 KiB, so that tiles reading them in place would land
// every row in the same few L1 sets.
struct KvBlock {
  const float* k;
  int64_t ldk;
  const float* v;
  int64_t ldv;
};
KvBlock kv_block(const FlashArgs& a, int64_t b, int64_t g, int64_t j0, int64_t nkp, int64_t dvp, float* kl, float* vl);

// The next key block's stored key and value rows, which the kernel
// prefetches a cache line at a time between its tiles' steps (the .inc's
// prefetch_line): from the cache, or from projections that outgrew L2, each
// block would otherwise wait on memory in load_rows / load_source_rows.
// rows rows of bytes bytes, stride bytes apart, per stream (keys, values);
// line: the next line's offset in the current row of stream `cur`.
struct RowStream {
  const char* p = nullptr;
  int64_t bytes = 0, stride = 0, rows = 0;
};
struct KvAhead {
  RowStream s[2];
  int64_t line = 0;
  int cur = 0;
};
// The rows below S of key block [j0, j0 + n) of kv head g of batch b.
void kv_rows_ahead(const FlashArgs& a, int64_t b, int64_t g, int64_t j0, int64_t n, KvAhead* ahead);
// Query lanes [lo[j], hi[j]) of key row j0 + j (j < nkp) survive the causal /
// window rule and the padding (rows j >= nk see nothing); returns whether
// the rule cuts any of the nk real rows (padding rows always are).
bool visible_lanes(const MaskRule& rule, int64_t i0, int64_t j0, int64_t nk, int64_t nkp, int64_t nql, int32_t* lo,
                   int32_t* hi);
// mt[j * kBr + ii] = the additive mask of (query i0 + ii, key j0 + j) in
// log2 units, zero outside [0, nq) x [0, nk).
void pack_mask(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t j0, int64_t nq, int64_t nql, int64_t nk,
               int64_t nkp, float* mt);
// Zeroes the dropped probabilities st[j * kBr + ii].
void apply_dropout(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t j0, int64_t nq, int64_t nk, float* st);
// Partial attention: o [kBr, ldo], m and l [kBr] of head h's queries i0 ..
// i0 + nq from the state (FlashArgs::state_m), lanes past nq empty; and back.
void load_state(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, float* o, int64_t ldo, float* m,
                float* l);
void store_state(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, const float* o, int64_t ldo,
                 const float* m, const float* l);
// ctx rows of queries i0 .. i0 + nq of head h = o [nq, ldo] / l.
void write_context(const FlashArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, const float* o, int64_t ldo,
                   const float* l);

}  // namespace flash_detail
}  // namespace mha::cpu
