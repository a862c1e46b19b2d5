#pragma once
// The cpu backend's multi-head latent attention (AttentionSpec::mla,
// model/mla.h), in float32: the projections as sgemm / GEMV on weights
// packed once per spec, run() in the expanded form through the flash kernel,
// and the absorbed form's two per-head products a decode session wraps
// around its latent cache (cpu_decode.cpp).
#include <optional>
#include <vector>

#include "backends/cpu/cpu_projection.h"
#include "model/mla.h"
#include "vec/isa.h"

namespace mha::cpu {

struct MlaPacked {
  PackedLinear q;                  // q_a_proj, or q_proj
  std::optional<PackedLinear> q_b;
  PackedLinear kv_a, kv_b;
  std::optional<PackedLinear> out;
  MlaNorms<float> norms;
  std::vector<float> kvb;          // kv_b [H*(dn + dv), kv_lora_rank], row-major
};
MlaPacked pack_mla(const AttentionSpec& spec);

// x [rows, in] -> q [rows, H*(dn + dr)] with each head's rope part rotated,
// and ckv [rows, kv_lora_rank + dr] normalised and rotated (the latent rows
// a cache holds), rows at table rows 0 .. rows-1. One row: GEMVs.
void mla_project(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const RopeTable& t, const float* x,
                 int64_t rows, std::vector<float>& q, std::vector<float>& ckv);
// The absorbed queries qa [rows, H, kv_lora_rank + dr]: [q_nope_h @ W_kb_h | q_rope_h].
void mla_absorb_query(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const float* q, int64_t rows,
                      float* qa);
// ctx [rows, H*dv] = per head the latent context cl [rows, H*kv_lora_rank] @ W_vb_h^T.
void mla_expand_context(ThreadPool& pool, const AttentionSpec& spec, const MlaPacked& w, const float* cl, int64_t rows,
                        float* ctx);

// The expanded form over self-attention inputs (MLA has a rope: S == L);
// with stages, the context [B, L, H*dv] and the output.
AttentionResult run_mla(const AttentionSpec& spec, const AttentionInputs& in, const MlaPacked& w, ThreadPool& pool,
                        vec::Isa isa, bool stages = false);

}  // namespace mha::cpu
