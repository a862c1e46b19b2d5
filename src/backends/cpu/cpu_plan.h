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

namespace mha::cpu {

struct PlanKey {
  uint64_t spec = 0;  // AttentionSpec::uid
  Shape query, key, value, mask;  // mask empty: none
  bool need_weights = false, collect_stages = false;
  bool fused = false;  // query, key and value held the same data
  bool operator<(const PlanKey& o) const {
    return std::tie(spec, query, key, value, mask, need_weights, collect_stages, fused) <
           std::tie(o.spec, o.query, o.key, o.value, o.mask, o.need_weights, o.collect_stages, o.fused);
  }
};

// Projection outputs, laid out as the GEMMs write them:
//   fused:    proj [B*L, Eq+Ek+Ev]: q, k, v are column offsets 0, Eq, Eq+Ek
//   separate: proj = q [B*L, Eq] ++ k [B*S, Ek] ++ v [B*S, Ev]
struct Plan {
  // The spec's scalars as built: with the packed weights they let a run
  // detect a different spec that reuses a freed spec's address.
  std::tuple<int64_t, int64_t, int64_t, int64_t, double, bool, int64_t, bool, double> spec_scalars;
  bool fused = false;
  int64_t B = 0, L = 0, S = 0;
  int64_t eq = 0, ek = 0, ev = 0;  // projection widths H*dh, Hkv*dh, Hkv*dv
  PackedLinear qkv, q, k, v;  // qkv when fused, else q, k, v
  std::unique_ptr<PackedLinear> out;
  std::vector<float> bias_k, bias_v;
  std::vector<float> proj;
  std::vector<float> ctx;  // [B*L, H*dv]; empty when ctx is written in place (see ctx_in_place)
  bool ctx_in_place = false;  // over q's columns: dv == dh and an output projection follows
  std::vector<FlashScratch> scratch;  // one per thread

  float* q_ptr() { return proj.data(); }
  float* k_ptr() { return proj.data() + (fused ? eq : B * L * eq); }
  float* v_ptr() { return proj.data() + (fused ? eq + ek : B * L * eq + B * S * ek); }
  int64_t ldq() const { return fused ? eq + ek + ev : eq; }
  int64_t ldk() const { return fused ? eq + ek + ev : ek; }
  int64_t ldv() const { return fused ? eq + ek + ev : ev; }
};

std::unique_ptr<Plan> build_plan(const AttentionSpec& spec, const AttentionInputs& in, bool fused, bool flash,
                                 int threads);

// Whether `plan` was built from a spec equal to `spec` (scalars and every
// weight byte): the cache key holds the spec's address, and a caller may
// destroy a spec and build another at the same address.
bool plan_matches(ThreadPool& pool, const Plan& plan, const AttentionSpec& spec);

// Runs the q, k, v projections of `in` into plan.proj.
void project_qkv(ThreadPool& pool, Plan& plan, const AttentionInputs& in);

// Input data as float32: the tensor's own bytes, or a converted copy in tmp.
const float* f32_data(const Tensor& t, std::vector<float>& tmp);

}  // namespace mha::cpu
