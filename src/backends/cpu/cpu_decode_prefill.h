#pragma once
// Prefill at depth: the cpu decode session's append of n > 1 rows
// (cpu_decode.cpp) through the flash kernel, whatever the cache already
// holds. Appending n tokens to a cache of `len` attends the n x (len + n)
// causal (and windowed) block: query rows are the session's projected rows,
// keys and values are read straight from the cache [B, Hkv, max_tokens, d]
// through one loader that widens a block of cache rows to float32
// (kv_rows_to_f32, kv_format.h: a new cache format plugs in there).
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_thread_pool.h"
#include "model/cache_dtype.h"
#include "model/mask.h"

namespace mha::cpu {

// The cache as the prefill reads it: k [B, Hkv, T, dh] and v [B, Hkv, T, dv]
// in `dtype`, T = max_tokens. vbytes: the bytes between value rows, 0 for
// kv_row_bytes(dtype, dv); MLA's values are its latent rows' first dv
// columns (v = k, vbytes = the latent row's bytes).
struct CacheView {
  CacheDtype dtype = CacheDtype::Float32;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t Hkv = 0, T = 0, dh = 0, dv = 0;
  int64_t vbytes = 0;
};

// One append's attention: q [B*n, ldq] (query head h at columns h*dh), the
// rows at positions len .. len+n-1 whose keys and values the cache already
// holds (cache rows 0 .. len+n-1 valid) -> ctx [B*n, ldc] (head h at
// columns h*dv). One flash task per (batch, head set, block of kBr queries),
// longest first; scratch holds one FlashScratch per pool thread.
struct PrefillArgs {
  CacheView cache;
  MaskRule rule;
  float scale = 1.0f;
  int64_t B = 0, H = 0, n = 0, len = 0;
  const float* q = nullptr;
  int64_t ldq = 0;
  float* ctx = nullptr;
  int64_t ldc = 0;
  vec::Isa isa = vec::best_isa();
};
void prefill_attention(ThreadPool& pool, const PrefillArgs& p, std::vector<FlashScratch>& scratch);

// Multi-head latent attention's absorbed form over its latent cache
// (cpu_decode.cpp's MLA session): for each new row r (position len + r) of
// every batch, its H absorbed queries qa [B*n, H, dh] (dh = kv_lora_rank +
// rope_dim) against the one latent key head's visible rows [first_key,
// len + r], whose values are their first dv = kv_lora_rank columns ->
// latent context ctx [B*n, H, dv]. The heads sharing that key head are the
// flash kernel's query rows, so its register tiles, which reach ~90 % of
// the FMA peak, carry the work that is ~120 FLOP per cached byte at
// DeepSeek-V3's 128 heads: heads go in blocks of whole vectors (at most
// kBr), enough blocks for every thread, each streaming the visible rows.
struct LatentArgs {
  CacheView cache;  // Hkv 1; v = k with vbytes set
  MaskRule rule;    // the spec's: its window picks each row's first key
  float scale = 1.0f;
  int64_t B = 0, H = 0, n = 0, len = 0;
  const float* qa = nullptr;
  float* ctx = nullptr;
  vec::Isa isa = vec::best_isa();
};
// One head's context from its key chunks' partial softmax states: chunk k's
// unnormalised context o + k * o_stride [dv], running max m[k * ml_stride]
// (base-2 units) and sum l[k * ml_stride], rescaled to the largest max,
// summed and normalised. A sink (the same units; -INFINITY for none) joins
// the max and the denominator and adds no value.
void merge_chunk_contexts(int64_t chunks, int64_t dv, const float* o, int64_t o_stride, const float* m, const float* l,
                          int64_t ml_stride, float sink, float* ctx);

// A bfloat16 latent cache runs on AMX's tiles instead (cpu_mla_amx.h) at a
// 512-bit `isa` on a CPU with AMX (vec::cpu_has_amx) when the widths fit:
// the same float32 accuracy at several times the flash kernel's FLOP rate.
void latent_attention(ThreadPool& pool, const LatentArgs& p, std::vector<FlashScratch>& scratch);
// Whether that AMX path is open at `isa` (the backend's "kernels" level).
bool latent_amx_runs(vec::Isa isa);

// The FlashRowSource over a cache view (tests drive the kernel with it).
FlashRowSource cache_row_source(const CacheView& view);

}  // namespace mha::cpu
