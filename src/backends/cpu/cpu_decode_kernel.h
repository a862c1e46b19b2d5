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

}  // namespace mha::cpu
