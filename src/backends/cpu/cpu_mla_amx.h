#pragma once
// MLA's absorbed decode attention on AMX tiles (the amx extension of
// src/vec/isa_levels.def), for a bfloat16 latent cache, at float32 accuracy.
//
// TDPBF16PS multiplies bfloat16 pairs exactly and accumulates in float32.
// The cached latent rows are bfloat16 already; each float32 operand on the
// other side (the absorbed queries, the softmax probabilities) is split into
// three bfloat16 pieces by truncation, x = x1 + x2 + x3 exactly (x1 keeps
// x's top 8 significant bits, x2 the next 8 of the remainder, x3 the rest,
// at most 8 bits), so three tile passes give the float32 dot product up to
// the order of its float32 additions. Only residual pieces below bfloat16's
// normal range (|x| < 2^-110 or so) are lost: AMX reads subnormal inputs as 0.
//
// Scores go as S^T = C . Q^T (C's rows straight from the cache as the A
// tiles, Q^T's pieces packed once per call as B tiles), P.V as
// O += P . C (P's pieces transposed into A tiles, C's value columns paired
// into B tiles per key block), with the online softmax between them; the
// accumulators stay in L2 and rescale only for heads whose running max rose.
#include <cstdint>

namespace mha::cpu {

// One call: nh absorbed queries q [nh, dh] (scale * log2 e is c1) against S
// latent rows of bfloat16 starting at `rows`, row_elems apart, whose values
// are their first dv columns -> ctx [nh, dv].
struct LatentAmxTask {
  const uint16_t* rows = nullptr;
  int64_t row_elems = 0, S = 0, dh = 0, dv = 0;
  const float* q = nullptr;
  int64_t nh = 0;
  float c1 = 0.0f;
  float* ctx = nullptr;
  // With m set: ctx gets the unnormalised context, m and l [nh] each head's
  // running max (log2 units) and sum, for a caller that merges key chunks.
  float* m = nullptr;
  float* l = nullptr;
};

// Whether latent rows of width dh with values of width dv fit the tiles
// (whole 32-element tile rows on both sides).
bool latent_amx_fits(int64_t dh, int64_t dv);
// Heads per call in whole multiples of this (the score tiles' head pairs).
constexpr int64_t kLatentAmxHeads = 32;
// Runs one task; call only when vec::cpu_has_amx() (src/vec/isa.h). The
// scratch is the calling thread's own.
void latent_amx(const LatentAmxTask& t);

}  // namespace mha::cpu
