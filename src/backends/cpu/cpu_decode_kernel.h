#pragma once
// The attention of one decode chunk: the G query heads of one KV-head group
// against cache keys [j0, j1) of that KV head, as an online-softmax partial
// (m, l, o) that cpu_decode.cpp merges across chunks. The same source
// (cpu_decode_kernel.inc) is compiled for AVX2+FMA, AVX-512 and AVX-512 with
// VNNI (cpu_decode_avx2/avx512/avx512vnni.cpp, each with its level's flags:
// src/vec/isa_levels.def); decode_kernel() picks one from the CPU at run
// time, so the binary runs on any AVX2+FMA(+F16C)
// machine. Every cache format is read in place: each vector of a cached row
// is decoded in registers as it is used, never widened into a copy.
#include <cstdint>
#include <vector>

#include "model/cache_dtype.h"
#include "vec/isa.h"

namespace mha::cpu {

// The kernel's tunables: how it paces its memory streams and tiles its
// passes. None changes an output bit (every value gives each score and each
// output element the same chain of operations; decode_tuning_test checks
// it), only the speed, so a machine may pick its own (cpu_decode_tuning.h
// calibrates them). The defaults are the constants tuned on an AVX-512 EPYC
// (Zen 5). 0 in v_strip / score_keys: the kernel's own choice for the ISA
// and format (decode_tuning_defaults says which).
struct DecodeTuning {
  // How far ahead (bytes) the score pass, and the block formats' V pass,
  // prefetch their cache stream. The hardware prefetchers alone left a
  // one-thread pass at 17-19 GB/s against the ~40 GB/s probe on the EPYC (the
  // V pass reads each block of keys in column strips, not in address order);
  // one memory latency times the probed bandwidth is ~4 KiB, and 4-16 KiB
  // measured alike there (docs/BENCHMARKS.md).
  int64_t prefetch = 8192;
  // The one-element formats' paced V prefetch distance (accumulate_v).
  int64_t v_pace = 16384;
  // Keys per P.V block: their V rows stay in L1 across the heads' strips.
  int64_t v_block = 32;
  // Vectors per P.V strip where a format's unit is one vector: 2, 3 or 4
  // (other block formats keep the strips that tile their blocks).
  int v_strip = 0;
  // AVX2's one-element formats: keys per score batch, 3 (pairs of
  // three-key batches) or 2; the other paths keep their ISA's batch.
  int score_keys = 0;
  bool operator==(const DecodeTuning& o) const {
    return prefetch == o.prefetch && v_pace == o.v_pace && v_block == o.v_block && v_strip == o.v_strip &&
           score_keys == o.score_keys;
  }
  bool operator!=(const DecodeTuning& o) const { return !(*this == o); }
};

struct DecodeChunk {
  const float* q = nullptr;   // [G, dh] the group's query rows (rotated), contiguous
  const void* k = nullptr;    // this KV head's cache rows of dh elements, kbytes apart
  const void* v = nullptr;    // ... of dv elements, vbytes apart
  CacheDtype dt = CacheDtype::Float32;  // their format (backends/cpu/kv_format.h)
  int64_t kbytes = 0, vbytes = 0;       // kv_row_bytes(dt, dh), kv_row_bytes(dt, dv)
  int64_t j0 = 0, j1 = 0;     // keys of the chunk
  int64_t G = 1, dh = 1, dv = 1;
  float scale_log2 = 1.0f;    // scale * log2(e): scores in log2 units, for exp2
  float* s = nullptr;         // scratch [G, j1 - j0]
  float* o = nullptr;         // out [G, dv]: sum_j 2^(s_j - m) v_j
  float* m = nullptr;         // out [G]: max score (log2 units)
  float* l = nullptr;         // out [G]: sum_j 2^(s_j - m)
  bool scores_only = false;   // tests: stop once s holds the scores (log2 units); m, l, o unset
  // Optional [3]: the calling thread's CPU seconds in the score, softmax
  // and P.V passes are added here (mha_decode_bench's per-pass columns).
  double* pass_cpu_s = nullptr;
  DecodeTuning tune;          // speed only: any valid value gives the same bits
};

// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
double decode_thread_cpu_s();

using DecodeKernel = void (*)(const DecodeChunk&);
void decode_chunk_avx2(const DecodeChunk& c);
void decode_chunk_avx512(const DecodeChunk& c);
void decode_chunk_avx512vnni(const DecodeChunk& c);  // AVX-512 with AVX512_VNNI (integer K scores)
// n cached rows of d elements (rb bytes apart) widened to dst [n, d] at
// stride ld with the kernel's decoders; kv_rows_to_f32 (kv_format.h) calls
// the widest and makes the result exact where they are not.
using DecodeWiden = void (*)(CacheDtype dt, const void* rows, int64_t n, int64_t d, int64_t rb, float* dst, int64_t ld);
void decode_widen_avx2(CacheDtype dt, const void* rows, int64_t n, int64_t d, int64_t rb, float* dst, int64_t ld);
void decode_widen_avx512(CacheDtype dt, const void* rows, int64_t n, int64_t d, int64_t rb, float* dst, int64_t ld);
DecodeWiden decode_widen();
// The instances by level (src/vec/isa.h); the widest this CPU runs, and
// a kernel's name ("avx512vnni", "avx512" or "avx2"); decode_kernels: every
// kernel this CPU runs, narrowest first.
const vec::ByIsa<DecodeKernel>& decode_kernel_set();
DecodeKernel decode_kernel();
const char* decode_kernel_isa(DecodeKernel k = decode_kernel());
std::vector<DecodeKernel> decode_kernels();
// The tuning kernel k runs for dt by default, its zero fields resolved.
DecodeTuning decode_tuning_defaults(DecodeKernel k, CacheDtype dt);
DecodeTuning decode_tuning_defaults_avx2(CacheDtype dt);
DecodeTuning decode_tuning_defaults_avx512(CacheDtype dt);  // and avx512vnni's (the same vectors)

}  // namespace mha::cpu
