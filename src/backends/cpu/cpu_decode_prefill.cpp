// Prefill at depth (cpu_decode_prefill.h). The flash kernel sees the cache
// through a FlashRowSource: per key block of kBc rows it asks for rows
// [j0, j0 + n) of one (batch, kv head) plane, which are contiguous in the
// [B, Hkv, T, d] layout, and kv_rows_to_f32 (kv_format.h) widens them into
// the kernel's dense block. Queries keep their token positions (FlashArgs::q_pos0 = len),
// so the causal / window rule, and with it the keys each block skips, is the
// one-shot run's.
#include "backends/cpu/cpu_decode_prefill.h"

#include <cstring>

#include "backends/cpu/kv_format.h"

namespace mha::cpu {

namespace {

void load_cache_rows(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t n, float* dst, int64_t ldd) {
  const CacheView& c = *static_cast<const CacheView*>(self);
  const int64_t d = value ? c.dv : c.dh, row = kv_row_bytes(c.dtype, d);
  const unsigned char* base = static_cast<const unsigned char*>(value ? c.v : c.k);
  kv_rows_to_f32(c.dtype, base + ((b * c.Hkv + g) * c.T + j0) * row, n, d, dst, ldd);
  if (ldd > d)  // the kernel's tile padding
    for (int64_t j = 0; j < n; ++j) std::memset(dst + j * ldd + d, 0, sizeof(float) * (ldd - d));
}

const void* locate_cache_rows(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t* row_bytes) {
  const CacheView& c = *static_cast<const CacheView*>(self);
  const int64_t row = kv_row_bytes(c.dtype, value ? c.dv : c.dh);
  *row_bytes = row;
  return static_cast<const unsigned char*>(value ? c.v : c.k) + ((b * c.Hkv + g) * c.T + j0) * row;
}

}  // namespace

FlashRowSource cache_row_source(const CacheView& view) {
  FlashRowSource s;
  s.load = load_cache_rows;
  s.locate = locate_cache_rows;
  s.floats = view.dtype == CacheDtype::Float32;
  s.self = &view;
  return s;
}

void prefill_attention(ThreadPool& pool, const PrefillArgs& p, std::vector<FlashScratch>& scratch) {
  const CacheView& c = p.cache;
  const FlashRowSource src = cache_row_source(c);
  FlashArgs a;
  a.B = p.B, a.L = p.n, a.S = a.St = p.len + p.n;
  a.H = p.H, a.Hkv = c.Hkv, a.dh = c.dh, a.dv = c.dv;
  a.q = p.q, a.ldq = p.ldq;
  a.rows = &src;
  a.scale = p.scale;
  a.rule = p.rule;
  a.q_pos0 = p.len;
  a.ctx = p.ctx, a.ldc = p.ldc;
  a.isa = p.isa;
  if (scratch.size() != static_cast<std::size_t>(pool.size()) || scratch[0].kl.size() != static_cast<std::size_t>(kBc * c.dh) ||
      scratch[0].vl.size() < static_cast<std::size_t>(kBc * c.dv)) {
    scratch.assign(pool.size(), {});
    for (FlashScratch& s : scratch) s.resize(c.dh, c.dv);
  }
  const int64_t nqb = flash_query_blocks(p.n), sets = flash_head_sets(p.H, c.Hkv);
  // With a causal rule the last query blocks see the most keys: they go
  // first so the dynamic schedule ends on short tasks.
  pool.parallel_for(p.B * sets * nqb, [&](int64_t t, int thread) {
    const int64_t qb = nqb - 1 - t % nqb, bs = t / nqb;
    flash_block(a, bs / sets, bs % sets, qb, scratch[thread]);
  });
}

}  // namespace mha::cpu
