// Prefill at depth (cpu_decode_prefill.h). The flash kernel sees the cache
// through a FlashRowSource: per key block of kBc rows it asks for rows
// [j0, j0 + n) of one (batch, kv head) plane, which are contiguous in the
// [B, Hkv, T, d] layout, and kv_rows_to_f32 (kv_format.h) widens them into
// the kernel's dense block. Queries keep their token positions (FlashArgs::q_pos0 = len),
// so the causal / window rule, and with it the keys each block skips, is the
// one-shot run's.
#include "backends/cpu/cpu_decode_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_mla_amx.h"
#include "backends/cpu/kv_format.h"

namespace mha::cpu {

namespace {

int64_t stored_row_bytes(const CacheView& c, bool value) {
  return value && c.vbytes > 0 ? c.vbytes : kv_row_bytes(c.dtype, value ? c.dv : c.dh);
}

void ensure_scratch(ThreadPool& pool, const CacheView& c, std::vector<FlashScratch>& scratch) {
  if (scratch.size() != static_cast<std::size_t>(pool.size()) || scratch[0].kl.size() != static_cast<std::size_t>(kBc * c.dh) ||
      scratch[0].vl.size() < static_cast<std::size_t>(kBc * c.dv)) {
    scratch.assign(pool.size(), {});
    for (FlashScratch& s : scratch) s.resize(c.dh, c.dv);
  }
}

void load_cache_rows(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t n, float* dst, int64_t ldd) {
  const CacheView& c = *static_cast<const CacheView*>(self);
  const int64_t d = value ? c.dv : c.dh, row = stored_row_bytes(c, value);
  const unsigned char* base = static_cast<const unsigned char*>(value ? c.v : c.k);
  kv_rows_to_f32(c.dtype, base + ((b * c.Hkv + g) * c.T + j0) * row, n, d, dst, ldd, row);
  if (ldd > d)  // the kernel's tile padding
    for (int64_t j = 0; j < n; ++j) std::memset(dst + j * ldd + d, 0, sizeof(float) * (ldd - d));
}

const void* locate_cache_rows(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t* row_bytes) {
  const CacheView& c = *static_cast<const CacheView*>(self);
  const int64_t row = stored_row_bytes(c, value);
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
  ensure_scratch(pool, c, scratch);
  const int64_t nqb = flash_query_blocks(p.n), sets = flash_head_sets(p.H, c.Hkv);
  // With a causal rule the last query blocks see the most keys: they go
  // first so the dynamic schedule ends on short tasks.
  pool.parallel_for(p.B * sets * nqb, [&](int64_t t, int thread) {
    const int64_t qb = nqb - 1 - t % nqb, bs = t / nqb;
    flash_block(a, bs / sets, bs % sets, qb, scratch[thread]);
  });
}

namespace {

bool latent_on_amx(const LatentArgs& p) {
  return p.cache.dtype == CacheDtype::Bfloat16 && latent_amx_runs(p.isa) && latent_amx_fits(p.cache.dh, p.cache.dv);
}

// Keys per chunk: a row's visible keys go in chunks of this many, fixed by
// their count alone, each task one (batch, head block, chunk), the chunks'
// softmax states merged in order. The cut does not depend on the thread
// count, so neither do the bits; at depth 32768 two threads each stream half
// the cache for every head (against every key for half the heads: 10 % more
// time, the per-key work of the value tiles being the same for fewer heads).
constexpr int64_t kLatentChunk = 8192;

// One task per (batch, head block, key chunk): head blocks of whole tile
// pairs, as many as the threads per batch row leave after the chunks.
void latent_attention_amx(ThreadPool& pool, const LatentArgs& p) {
  const CacheView& c = p.cache;
  const int64_t H = p.H, per_row = std::max<int64_t>(1, (pool.size() + p.B - 1) / p.B);
  std::vector<float> part, ml;
  for (int64_t r = 0; r < p.n; ++r) {
    const int64_t pos = p.len + r, j0 = p.rule.first_key(pos), S = pos + 1 - j0;
    const int64_t chunks = (S + kLatentChunk - 1) / kLatentChunk;
    const int64_t want = std::min((H + kLatentAmxHeads - 1) / kLatentAmxHeads, (per_row + chunks - 1) / chunks);
    const int64_t hb = ((H + want - 1) / want + kLatentAmxHeads - 1) / kLatentAmxHeads * kLatentAmxHeads;
    const int64_t blocks = (H + hb - 1) / hb;
    if (chunks > 1) part.resize(p.B * chunks * H * c.dv), ml.resize(2 * p.B * chunks * H);
    pool.parallel_for(p.B * blocks * chunks, [&](int64_t t, int) {
      const int64_t b = t / (blocks * chunks), h0 = t / chunks % blocks * hb, k0 = t % chunks * kLatentChunk;
      LatentAmxTask k;
      k.rows = static_cast<const uint16_t*>(c.k) + (b * c.T + j0 + k0) * c.dh;  // one key head: [B, T, dh]
      k.row_elems = c.dh, k.S = std::min(kLatentChunk, S - k0), k.dh = c.dh, k.dv = c.dv;
      k.q = p.qa + ((b * p.n + r) * H + h0) * c.dh;
      k.nh = std::min(hb, H - h0);
      k.c1 = p.scale * kLog2e;
      k.ctx = p.ctx + ((b * p.n + r) * H + h0) * c.dv;
      if (chunks > 1) {
        const int64_t at = (b * chunks + t % chunks) * H + h0;
        k.ctx = part.data() + at * c.dv, k.m = ml.data() + at, k.l = ml.data() + p.B * chunks * H + at;
      }
      latent_amx(k);
    });
    if (chunks == 1) continue;
    pool.parallel_for(p.B * H, [&](int64_t t, int) {
      const int64_t b = t / H, h = t % H, at = b * chunks * H + h;
      merge_chunk_contexts(chunks, c.dv, part.data() + at * c.dv, H * c.dv, ml.data() + at, ml.data() + p.B * chunks * H + at,
                           H, -INFINITY, p.ctx + ((b * p.n + r) * H + h) * c.dv);
    });
  }
}

}  // namespace

void merge_chunk_contexts(int64_t chunks, int64_t dv, const float* o, int64_t o_stride, const float* m, const float* l,
                          int64_t ml_stride, float sink, float* ctx) {
  float M = sink;
  for (int64_t k = 0; k < chunks; ++k) M = std::max(M, m[k * ml_stride]);
  std::fill(ctx, ctx + dv, 0.0f);
  float L = sink == -INFINITY ? 0.0f : std::exp2(sink - M);
  for (int64_t k = 0; k < chunks; ++k) {
    const float w = std::exp2(m[k * ml_stride] - M);
    L += w * l[k * ml_stride];
    for (int64_t d = 0; d < dv; ++d) ctx[d] += w * o[k * o_stride + d];
  }
  for (int64_t d = 0; d < dv; ++d) ctx[d] /= L;
}

bool latent_amx_runs(vec::Isa isa) { return vec::vector_bits(isa) == 512 && vec::cpu_has_amx(); }

void latent_attention(ThreadPool& pool, const LatentArgs& p, std::vector<FlashScratch>& scratch) {
  if (latent_on_amx(p)) return latent_attention_amx(pool, p);
  const CacheView& c = p.cache;
  ensure_scratch(pool, c, scratch);
  // Head blocks per row: whole 16-lane vectors of at most kBr heads, as many
  // as the threads per batch row (no more than one vector each).
  const int64_t H = p.H, per_row = std::max<int64_t>(1, (pool.size() + p.B - 1) / p.B);
  const int64_t want = std::max((H + kBr - 1) / kBr, std::min((H + 15) / 16, per_row));
  const int64_t hb = std::min(kBr, ((H + want - 1) / want + 15) / 16 * 16), blocks = (H + hb - 1) / hb;
  for (int64_t r = 0; r < p.n; ++r) {
    const int64_t pos = p.len + r, j0 = p.rule.first_key(pos);
    CacheView view = c;  // the row's visible keys start at j0
    view.k = static_cast<const unsigned char*>(c.k) + j0 * kv_row_bytes(c.dtype, c.dh);
    view.v = static_cast<const unsigned char*>(c.v) + j0 * stored_row_bytes(c, true);
    const FlashRowSource src = cache_row_source(view);
    FlashArgs a;
    a.B = p.B, a.S = a.St = pos + 1 - j0, a.H = a.Hkv = 1, a.dh = c.dh, a.dv = c.dv;
    a.ldq = c.dh, a.ldc = c.dv, a.q_batch_rows = p.n * H;  // query rows: one batch's rows x heads
    a.rows = &src;
    a.scale = p.scale;  // every key is visible to every head: no rule
    a.isa = p.isa;
    pool.parallel_for(p.B * blocks, [&](int64_t t, int thread) {
      FlashArgs ab = a;
      const int64_t h0 = t % blocks * hb;
      ab.L = std::min(hb, H - h0);
      ab.q = p.qa + (r * H + h0) * c.dh;
      ab.ctx = p.ctx + (r * H + h0) * c.dv;
      flash_block(ab, t / blocks, 0, 0, scratch[thread]);
    });
  }
}

}  // namespace mha::cpu
