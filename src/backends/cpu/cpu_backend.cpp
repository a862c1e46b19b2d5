#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstring>
#include <map>
#include <thread>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_plain.h"
#include "backends/cpu/cpu_plan.h"
#include "util/error.h"

namespace mha {

namespace {

using cpu::Plan;
using cpu::PlanKey;

bool same_data(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.raw() == b.raw() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads) : threads_(threads), pool_(threads) {}

  std::string name() const override { return "cpu"; }
  CacheStats cache_stats() const override { return stats_; }
  nlohmann::json describe() const override {
    return {{"threads", threads_}, {"blas", "OpenBLAS"}, {"block_queries", cpu::kBr}, {"block_keys", cpu::kBc}};
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) override {
    validate_inputs(spec, in);
    // OpenBLAS's thread count is process-wide; BLAS runs only on this thread,
    // never inside pool tasks, so the two never compete for cores.
    openblas_set_num_threads(threads_);
    const bool plain = opt.need_weights || opt.collect_stages;
    // Self-attention variants pass one tensor three times: comparing bytes
    // (a few ms at the largest sizes, and it stops at the first difference
    // for cross-attention) lets one GEMM project q, k and v together.
    const bool fused = spec.q_in() == spec.k_in() && spec.q_in() == spec.v_in() && same_data(in.query, in.key) &&
                       same_data(in.query, in.value);
    PlanKey key{spec.uid, in.query.shape(), in.key.shape(), in.value.shape(), in.mask ? in.mask->shape() : Shape{},
                opt.need_weights, opt.collect_stages, fused};
    auto it = plans_.find(key);
    if (it != plans_.end() && cpu::plan_matches(pool_, *it->second, spec)) {
      ++stats_.hits;
    } else {
      ++stats_.misses;
      auto plan = cpu::build_plan(spec, in, fused, !plain, threads_);
      if (it == plans_.end())
        it = plans_.emplace(key, std::move(plan)).first;
      else
        it->second = std::move(plan);
    }
    Plan& plan = *it->second;
    if (plain) return cpu::run_plain(spec, in, opt, plan, pool_);
    return run_flash(spec, in, plan);
  }

 private:
  AttentionResult run_flash(const AttentionSpec& spec, const AttentionInputs& in, Plan& plan) {
    const int64_t B = plan.B, L = plan.L, H = spec.num_heads, dv = spec.head_dim_v;
    AttentionResult r;
    r.output = Tensor(DType::F32, {B, L, spec.out_dim()});
    cpu::project_qkv(pool_, plan, in);

    cpu::FlashArgs a;
    a.B = B, a.L = L, a.S = plan.S, a.St = plan.S + spec.extra_keys();
    a.H = H, a.Hkv = spec.num_kv_heads, a.dh = spec.head_dim, a.dv = dv;
    a.q = plan.q_ptr(), a.k = plan.k_ptr(), a.v = plan.v_ptr();
    a.ldq = plan.ldq(), a.ldk = plan.ldk(), a.ldv = plan.ldv();
    a.bias_k = plan.bias_k.empty() ? nullptr : plan.bias_k.data();
    a.bias_v = plan.bias_v.empty() ? nullptr : plan.bias_v.data();
    a.scale = static_cast<float>(spec.scale);
    a.causal = spec.causal, a.window = spec.window;
    std::vector<float> tmask;
    if (in.mask) {
      a.mask = cpu::f32_data(*in.mask, tmask);
      a.mask_b = in.mask->dim(0), a.mask_h = in.mask->dim(1);
    }
    a.dropout = in.training && spec.dropout > 0.0;
    a.dropout_p = spec.dropout, a.dropout_seed = in.dropout_seed;
    // Context goes straight into the output when nothing follows it.
    if (!plan.out)
      a.ctx = r.output.data<float>(), a.ldc = H * dv;
    else if (plan.ctx_in_place)
      a.ctx = plan.q_ptr(), a.ldc = plan.ldq();
    else
      a.ctx = plan.ctx.data(), a.ldc = H * dv;

    pool_.parallel_for(B * H * cpu::flash_query_blocks(L),
                       [&](int64_t t, int thread) { cpu::flash_task(a, t, plan.scratch[thread]); });
    if (plan.out) cpu::linear(pool_, *plan.out, a.ctx, a.ldc, B * L, r.output.data<float>(), spec.out_dim());
    return r;
  }

  int threads_;
  cpu::ThreadPool pool_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  CacheStats stats_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const nlohmann::ordered_json& options, const std::string& json_path) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  if (!options.is_null() && !options.is_object())
    throw InputError(json_path + ": expected an object of cpu backend options, found " + options.dump());
  if (options.is_object())
    for (auto it = options.begin(); it != options.end(); ++it) {
      if (it.key() == "threads") {
        const auto& v = it.value();
        if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024)
          throw InputError(json_path + ".threads: expected an integer from 1 to 1024, found " + v.dump());
        threads = static_cast<int>(v.get<int64_t>());
      } else {
        throw InputError(json_path + "." + it.key() + ": unknown key for backend 'cpu' (expected: threads)");
      }
    }
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace mha
