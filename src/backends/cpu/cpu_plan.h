#pragma once
// What the cpu backend builds on the first run of a spec with given input
// shapes and keeps for later runs: packed weights and every workspace.
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_projection.h"
#include "model/attention.h"
#include "model/qk_norm.h"
#include "model/rope.h"

namespace mha::cpu {

struct PlanKey {
  uint64_t spec = 0;  // AttentionSpec::uid
  Shape query, key, value, mask;  // mask empty: none
  bool need_weights = false, collect_stages = false;
  bool group_projections = false;  // RunOptions::group_projections
  bool qkv_same = false;  // query, key and value held the same data
  bool kv_same = false;   // key and value did
  bool operator<(const PlanKey& o) const {
    return std::tie(spec, query, key, value, mask, need_weights, collect_stages, group_projections, qkv_same, kv_same) <
           std::tie(o.spec, o.query, o.key, o.value, o.mask, o.need_weights, o.collect_stages, o.group_projections, o.qkv_same,
                    o.kv_same);
  }
};

// How the projections run and where they land (row-major, row strides ld*):
//   kFusedQKV: one GEMM into [rows, Eq+Ek+Ev]; q, k, v are column offsets.
//   kSeparate: q [rows, Eq], k [rows, Ek], v [rows, Ev] (k and v share one
//              GEMM into [rows, Ek+Ev] when key and value are the same tensor).
//   kChunked:  as kSeparate for k and v, but q is projected, attended and
//              output-projected ChunkPolicy::rows query rows at a time, so
//              long sequences never hold all of q (1x32768x1024: 8 MiB of q
//              instead of 128): used when a group is one batch (sequences of
//              group_rows rows or more) and its q would exceed above_floats.
// The flash path of kFusedQKV and kSeparate projects, attends and
// output-projects group_batches batches at a time, so `rows` is a group's
// rows (seed 002's 8x384x1024: 2 batches, a 9.4 MiB workspace instead of
// 37.7 that stays in L3 between the GEMM and the attention, and that a first
// run faults in a quarter of the time). Within a group the GEMMs go in calls
// of kRowBlock rows (cpu_gemm.h).
enum class Layout { kFusedQKV, kSeparate, kChunked };
struct ChunkPolicy {
  int64_t above_floats = int64_t{16} << 20;
  int64_t rows = 20 * kBr;  // a multiple of kBr and of kRowBlock (build_plan rounds up)
  int64_t group_rows = 768;  // query rows per batch group, at least
};
// Process-wide; tests shrink it to exercise kChunked on small shapes.
ChunkPolicy& chunk_policy();

// Batches per projection group on the flash path: at least
// ChunkPolicy::group_rows rows, so one batch from sequences that long on
// (kChunked needs that). A function of B and L only, so that every spec with
// these inputs, a head-parallel rank's share included, cuts its projections'
// rows at the same places: OpenBLAS's bits for a row depend on where the
// call that computes it starts and ends (cpu_gemm.h).
int64_t projection_group_batches(int64_t B, int64_t L);

// y[B*L, lin.out] = x[B*L, lin.in] . w^T + b, one linear() per projection
// group: the row calls run_flash makes for its output projection (with
// kChunked's query chunks, which are whole kRowBlock blocks of a batch, the
// same calls and bits).
void project_rows(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t B, int64_t L, float* y);

struct Plan {
  // The spec's scalars as built: with the packed weights they let a run
  // detect a spec edited after it ran (a contract breach that would
  // otherwise silently reuse stale weights).
  std::tuple<int64_t, int64_t, int64_t, int64_t, double, bool, int64_t, bool, double, bool, double> spec_scalars;
  Layout layout = Layout::kSeparate;
  bool kv_fused = false;
  int64_t B = 0, L = 0, S = 0;
  int64_t group_batches = 0;  // batches the workspace holds (B unless flash)
  int64_t proj_group_batches = 0;  // batches per projection call (projection_group_batches)
  int64_t q_chunk_rows = 0;   // kChunked: query rows per chunk
  std::vector<PackedLinear> lin;  // qkv | q, kv | q, k, v
  std::unique_ptr<PackedLinear> out;
  std::vector<float> bias_k, bias_v;
  std::unique_ptr<float[]> proj;  // projection outputs
  float *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0;
  // Context [rows, H*dv] when it can be written neither into q (dv != dh)
  // nor straight into the output (an output projection follows).
  std::vector<float> ctx;
  std::vector<FlashScratch> scratch;  // one per thread
  // The rotary embedding's cos/sin for this run's positions (prepare_rope);
  // project_inputs and project_query_rows QK-normalise (qk_norm) and
  // rotate q and k with it.
  bool rope = false;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::optional<QkNormWeights<float>> qk_norm;
  RopeTable rope_table;
  bool rope_default_positions = false;  // the table holds 0..L-1 (kept between runs)
};

// The spec needs the plain path's [L, S] scores (cpu_plain.h) even for a
// flash run: the flash kernel has no logit softcap and no sinks.
bool needs_plain(const AttentionSpec& spec);

std::unique_ptr<Plan> build_plan(const AttentionSpec& spec, const AttentionInputs& in, const PlanKey& key,
                                 int threads);

// Whether `plan` was built from a spec equal to `spec` (scalars and every
// weight byte). The cache key holds the spec's uid; this check, about a
// millisecond per run at 1024-wide models, guards against specs edited
// after they ran.
bool plan_matches(ThreadPool& pool, const Plan& plan, const AttentionSpec& spec);

// Input data as float32: the tensor's own bytes, or a converted copy in tmp.
const float* f32_data(const Tensor& t, std::vector<float>& tmp);

// The run's query, key and value as float32, converted once per run (the
// conversions are declared before the pointers that may point into them).
struct F32Inputs {
  explicit F32Inputs(const AttentionInputs& in);
  F32Inputs(const F32Inputs&) = delete;
  F32Inputs& operator=(const F32Inputs&) = delete;
  std::vector<float> tq, tk, tv;
  const float *query, *key, *value;
};

// Fills plan.rope_table for this run's positions (a no-op without a rope,
// or when the default 0..L-1 table is already there).
void prepare_rope(Plan& plan, const AttentionSpec& spec, const AttentionInputs& in);

// Projects key and value (and query, unless the layout is kChunked) of
// batches [b0, b1) into the workspace's first rows; b1 - b0 <= group_batches.
// With a rope, q and k leave rotated.
void project_inputs(ThreadPool& pool, Plan& plan, const F32Inputs& x, int64_t b0, int64_t b1);
// kChunked: projects rows [r0, r0 + n) of the flattened query xq [B*L, q_in] into plan.q.
void project_query_rows(ThreadPool& pool, Plan& plan, const float* xq, int64_t r0, int64_t n);



}  // namespace mha::cpu
