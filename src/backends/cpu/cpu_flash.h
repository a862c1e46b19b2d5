#pragma once
// Blockwise (flash) attention: one task = one (batch, head set, block of
// kBr queries), a head set being up to kHeadsPerTask query heads of one KV
// group; it streams key/value blocks of kBc rows, packed once for the set's
// heads, with an online softmax, so memory stays O(s*d) and no [L, S]
// matrix is ever formed.
#include <cstdint>
#include <vector>

#include "model/mask.h"
#include "util/aligned_vector.h"
#include "vec/isa.h"

namespace mha::cpu {

// exp(x) = exp2(x * log2(e)): the kernels' softmax works in base 2.
constexpr float kLog2e = 1.4426950408889634f;
// Shared by both kernels (cpu_flash_kernel.h), so block boundaries, and with
// them the online softmax's bits, do not depend on the ISA.
constexpr int64_t kBr = 96;  // queries per task: whole vectors of either ISA
constexpr int64_t kBc = 96;  // keys per block: whole score-tile rows (AVX2 6, AVX-512 8)
// Query heads per task at most: with grouped-query attention the heads of
// one KV group share each packed key/value block; four keep a task's
// scratch (Q blocks and accumulators) within L2 at head_dim 128.
constexpr int64_t kHeadsPerTask = 4;

// Projected tensors as the projection GEMMs leave them, addressed by row
// stride so the fused [B*L, Eq+Ek+Ev] buffer needs no repacking:
//   q[(b*L + i - q_row0)*ldq + h*dh + d], k[(b*S + j - kv_row0)*ldk + g*dh + d],
//   v likewise with dv, ctx[(b*L + i - q_row0)*ldc + h*dv + d] (q_row0 and
//   kv_row0: the first flattened row held when only some rows are projected
//   at a time). ctx may alias q when dv == dh: a task
//   reads its own q rows before it writes the same ctx rows, and no other
//   task reads them.

// Keys and values held outside the projections, in a layout and element
// type of their own (the KV cache, cpu_decode_prefill.h): load writes rows
// [j0, j0 + n) of kv head g of batch b (values when `value`, else keys),
// all < S, widened to float32, into dst [n, ldd] with zero columns past d.
// locate gives where row j0 of that plane starts and *row_bytes, the bytes
// of one stored row (rows are back to back), so the kernel can prefetch the
// next block while it computes on this one.
struct FlashRowSource {
  void (*load)(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t n, float* dst, int64_t ldd) =
      nullptr;
  const void* (*locate)(const void* self, bool value, int64_t b, int64_t g, int64_t j0, int64_t* row_bytes) = nullptr;
  const void* self = nullptr;
  bool floats = false;  // rows are stored as float32 (locate set): the tiles may read them in place
};

struct FlashArgs {
  int64_t B = 0, L = 0, S = 0, St = 0, H = 0, Hkv = 0, dh = 0, dv = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0;
  int64_t q_row0 = 0, kv_row0 = 0;
  const float* bias_k = nullptr;  // [Hkv*dh]: key row S when present
  const float* bias_v = nullptr;
  float scale = 1.0f;
  MaskRule rule;  // causal / window
  const float* mask = nullptr;  // [mask_b, mask_h, mask_l, St] additive, broadcast
  int64_t mask_b = 1, mask_h = 1, mask_l = 1;  // mask_l: L, or 1 (one row for every query)
  bool dropout = false;
  double dropout_p = 0.0;
  uint64_t dropout_seed = 0;
  float* ctx = nullptr;
  int64_t ldc = 0;
  // Partial attention (backends/partial.h): q row i is token q_pos0 + i and
  // key row j token k_pos0 + j for the causal / window rule; q, ctx and the
  // state hold q_batch_rows rows per batch (0: L), of which rows [0, L) are
  // attended. With state_m set, ctx is the state's unnormalised accumulator
  // and state_m / state_l [rows, H] its max (base 2) and sum: a task starts
  // from them and stores them back instead of writing the context.
  int64_t q_pos0 = 0, k_pos0 = 0, q_batch_rows = 0;
  float* state_m = nullptr;
  float* state_l = nullptr;
  // With rows set, keys and values come from it and k, v, ldk, ldv, kv_row0
  // and the bias rows are unused (St must equal S).
  const FlashRowSource* rows = nullptr;
  // Which kernel instance runs a block (cpu_flash_kernel.h): the widest the
  // CPU has at this level's vector width (the cpu backend's "kernels"
  // option), so AVX2 figures can be measured on an AVX-512 machine.
  vec::Isa isa = vec::best_isa();
  int64_t q_stride() const { return q_batch_rows ? q_batch_rows : L; }
};

// Per-thread scratch, sized once per plan.
struct FlashScratch {
  // Cache-line aligned, and every row stride below a multiple of 16 floats
  // (kBr, kBc, dvp; dh at 16-multiples), so the tiles' vector loads never
  // straddle two lines.
  // Per head of the set: qt, o, m, l, alpha (kHeadsPerTask copies).
  AlignedVector<float> qt;   // [dh, kBr]   Q block transposed: score lanes are queries
  AlignedVector<float> st;   // [kBc, kBr]  scores, then probabilities, transposed
  AlignedVector<float> mt;   // [kBc, kBr]  additive mask block, transposed
  AlignedVector<float> kl;   // [kBc, dh]   key block (flash_detail::kv_block), padded with extras / zeros
  AlignedVector<float> vl;   // [kBc, dvp]  value block likewise, dv padded to the kernel's tile width
  AlignedVector<float> o;    // [kBr, dvp]  unnormalised context accumulator
  AlignedVector<float> m, l, alpha;  // [kBr] running max (log2 units), row sum, rescale
  void resize(int64_t dh, int64_t dv);
};

int64_t flash_query_blocks(int64_t L);
// Head sets per batch: each KV group's H / Hkv query heads in sets of at
// most kHeadsPerTask.
int64_t flash_head_sets(int64_t H, int64_t Hkv);
// Queries [qb*kBr, min(L, (qb+1)*kBr)) of batch b, for the heads of head
// set hs (< flash_head_sets), by the kernel a.isa names (cpu_flash_kernel.h).
void flash_block(const FlashArgs& a, int64_t b, int64_t hs, int64_t qb, FlashScratch& s);

}  // namespace mha::cpu
