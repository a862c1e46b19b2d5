#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_decode_prefill.h"
#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_flash_kernel.h"
#include "backends/cpu/cpu_flash_run.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_mla.h"
#include "backends/cpu/cpu_plain.h"
#include "backends/cpu/cpu_plan.h"
#include "backends/cpu/cpu_projection.h"
#include "backends/host_options.h"
#include "util/error.h"

namespace mha {

namespace {

using cpu::Plan;
using cpu::PlanKey;

bool same_data(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.raw() == b.raw() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

// The cpu backend's options: the host settings every computing backend
// takes (backends/host_options.h) and the decode kernel's tuning mode.
struct CpuOptions {
  HostOptions host;
  cpu::DecodeTuningMode decode_tuning = cpu::DecodeTuningMode::Auto;

  template <class V>
  void fields(V& v) {
    host.fields(v);
    v("decode_tuning", decode_tuning,
      "the decode kernel's tunables: \"auto\" (default: calibrated on first use of a cache of 24 MiB or more, "
      "stored in the user cache), \"defaults\", \"fresh\" (calibrate again)");
  }
};

class CpuBackend : public Backend {
 public:
  // Creating the backend also gives each thread its OpenBLAS buffer
  // (cpu_gemm.h): a per-process cost, kept out of every plan's first run.
  CpuBackend(int threads, vec::Isa isa, cpu::DecodeTuningMode tuning)
      : threads_(threads), isa_(isa), pool_(threads), tuner_(tuning) {
    cpu::warm_blas_buffers(pool_);
  }

  std::string name() const override { return "cpu"; }
  CacheStats cache_stats() const override { return stats_; }
  int threads() const override { return threads_; }
  nlohmann::json describe() const override {
    // simd (what `mha bench` rows report): the flash and decode kernels and
    // OpenBLAS's GEMM kernel are each chosen for this CPU at run time.
    return {{"threads", threads_},
            {"blas", "OpenBLAS"},
            {"block_queries", cpu::kBr},
            {"block_keys", cpu::kBc},
            {"heads_per_task", cpu::kHeadsPerTask},
            {"flash_simd", flash_isa()},
            {"attention_isa", flash_isa()},
            {"decode_simd", decode_isa()},
            {"decode_tuning", tuner_.describe()},
            {"mla_bfloat16_simd", cpu::latent_amx_runs(isa_) ? "amx" : flash_isa()},
            {"simd", std::string("flash ") + flash_isa() + ", decode " + decode_isa() +
                         (cpu::latent_amx_runs(isa_) ? ", MLA bfloat16 cache amx" : "") + ", OpenBLAS " +
                         openblas_get_corename()}};
  }

  std::optional<std::string> supports_decode(const AttentionSpec& spec) const override {
    return decode_unsupported(spec);
  }
  std::unique_ptr<DecodeSession> start_decode(const AttentionSpec& spec, const DecodeOptions& opt) override {
    if (decode_unsupported(spec)) return Backend::start_decode(spec, opt);  // throws the reason
    check_decode_options(spec, opt);
    return cpu::make_cpu_decode(spec, opt, pool_, isa_, &tuner_);
  }

  // The packed projection of run_flash (pack_linear, linear), on the pool.
  void project_rows(const Projection& p, const void* x, int64_t rows, void* y) override {
    cpu::SerialBlasScope serial_blas;
    const cpu::PackedLinear lin = cpu::pack_linear(p);
    cpu::linear(pool_, lin, static_cast<const float*>(x), lin.in, rows, static_cast<float*>(y), lin.out);
  }

  // run_flash's kernel with the positions offset and the state carried
  // (cpu_flash.h, FlashArgs::state_m): one task per (batch, head set, query
  // block of kBr), each over every key of the block in order, so the bits do
  // not depend on the thread count.
  void attend_partial(const AttentionSpec& spec, const Tensor& q, const QueryBlock& qb, const KeyBlock& kv,
                      SoftmaxState& st) override {
    const int64_t B = q.dim(0), n = q.dim(1), H = spec.num_heads, G = spec.num_kv_heads;
    cpu::FlashArgs a;
    a.B = B, a.L = qb.rows, a.q_batch_rows = n, a.S = kv.rows, a.St = kv.rows;
    a.H = H, a.Hkv = G, a.dh = spec.head_dim, a.dv = spec.head_dim_v;
    a.q = q.data<float>() + qb.row0 * H * a.dh, a.ldq = H * a.dh;
    a.k = static_cast<const float*>(kv.k), a.ldk = G * a.dh;
    a.v = static_cast<const float*>(kv.v), a.ldv = G * a.dv;
    a.scale = static_cast<float>(spec.scale);
    a.rule = MaskRule(spec);
    a.isa = isa_;
    a.q_pos0 = qb.pos0, a.k_pos0 = kv.pos0;
    a.ctx = st.acc.data<float>() + qb.row0 * H * a.dv, a.ldc = H * a.dv;
    a.state_m = st.m.data<float>() + qb.row0 * H, a.state_l = st.l.data<float>() + qb.row0 * H;
    if (scratch_dims_ != std::make_pair(a.dh, a.dv)) {
      scratch_.assign(threads_, {});
      for (auto& s : scratch_) s.resize(a.dh, a.dv);
      scratch_dims_ = {a.dh, a.dv};
    }
    const int64_t sets = cpu::flash_head_sets(H, G), nqb = cpu::flash_query_blocks(qb.rows);
    pool_.parallel_for(B * sets * nqb, [&](int64_t t, int thread) {
      cpu::flash_block(a, t / (sets * nqb), t / nqb % sets, t % nqb, scratch_[thread]);
    });
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) override {
    validate_inputs(spec, in);
    if (spec.mla) return run_mla(spec, in, opt);
    // Every GEMM runs inside pool tasks on single-threaded OpenBLAS, so the
    // pool's threads are the only ones busy (cpu_gemm.h says why).
    cpu::SerialBlasScope serial_blas;
    // Softcap and sinks run on the plain path: the flash kernel has neither.
    const bool plain = opt.need_weights || opt.collect_stages || cpu::needs_plain(spec);
    // Self-attention variants pass one tensor three times (and cross-attention
    // often passes key == value): comparing bytes (a few ms at the largest
    // sizes, stopping at the first difference otherwise) lets one GEMM
    // project them together.
    const bool kv_same = same_data(in.key, in.value);
    const bool qkv_same = kv_same && same_data(in.query, in.key);
    PlanKey key{spec.uid, in.query.shape(), in.key.shape(), in.value.shape(), in.mask ? in.mask->shape() : Shape{},
                opt.need_weights, opt.collect_stages, opt.group_projections, qkv_same, kv_same};
    auto it = plans_.find(key);
    if (it != plans_.end() && cpu::plan_matches(pool_, *it->second, spec)) {
      ++stats_.hits;
    } else {
      ++stats_.misses;
      auto plan = cpu::build_plan(spec, in, key, threads_);
      if (it == plans_.end())
        it = plans_.emplace(key, std::move(plan)).first;
      else
        it->second = std::move(plan);
    }
    Plan& plan = *it->second;
    if (plain) return cpu::run_plain(spec, in, opt, plan, pool_);
    return cpu::run_flash(spec, in, plan, pool_, isa_);
  }

  std::optional<std::string> capability_gap(Capability c, const AttentionSpec& spec) const override {
    // Both: project_output, and partial attention without softcap or sinks.
    return c == Capability::PartialAttention ? partial_unsupported(spec) : std::nullopt;
  }

  // The same pack_linear and row calls (project_rows), and so the same bits,
  // as run_flash's output projection of a context [B, L, E].
  std::optional<Tensor> project_output(const AttentionSpec& spec, const Tensor& context) override {
    cpu::SerialBlasScope serial_blas;
    const Tensor x = context.dtype() == DType::F32 ? context : context.cast(DType::F32);
    const cpu::PackedLinear lin = cpu::pack_linear(*spec.out);
    if (lin.in != x.dim(x.ndim() - 1)) throw std::logic_error("project_output: context width is not the weight's");
    Shape shape = x.shape();
    shape.back() = lin.out;
    Tensor y(DType::F32, shape);
    const int64_t B = x.ndim() == 3 ? x.dim(0) : 1, L = x.numel() / x.dim(x.ndim() - 1) / B;
    cpu::project_rows(pool_, lin, x.data<float>(), B, L, y.data<float>());
    return y;
  }

 private:
  // Multi-head latent attention's expanded form (cpu_mla.h), on weights
  // packed once per spec. Its stages are the context and the output (what
  // tt-sim's MLA pipeline collects); it has no attention weights to return.
  AttentionResult run_mla(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt) {
    if (opt.need_weights)
      throw InputError("backend cpu: multi-head latent attention returns no attention weights; run it on "
                       "the reference backend for those");
    cpu::SerialBlasScope serial_blas;
    auto it = mla_plans_.find(spec.uid);
    if (it == mla_plans_.end()) {
      ++stats_.misses;
      it = mla_plans_.emplace(spec.uid, std::make_unique<cpu::MlaPacked>(cpu::pack_mla(spec))).first;
    } else {
      ++stats_.hits;
    }
    return cpu::run_mla(spec, in, *it->second, pool_, isa_, opt.collect_stages);
  }

  const char* flash_isa() const { return cpu::flash_kernel_isa(isa_); }
  const char* decode_isa() const { return cpu::decode_kernel_isa(cpu::decode_kernel_for(isa_)); }

  int threads_;
  vec::Isa isa_;  // the "kernels" option
  cpu::ThreadPool pool_;
  cpu::DecodeTuner tuner_;  // the "decode_tuning" option; its sessions' choices
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::map<uint64_t, std::unique_ptr<cpu::MlaPacked>> mla_plans_;  // by spec uid
  std::vector<cpu::FlashScratch> scratch_;  // attend_partial's, per thread
  std::pair<int64_t, int64_t> scratch_dims_{-1, -1};
  CacheStats stats_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const nlohmann::ordered_json& options, const std::string& json_path) {
  if (!options.is_null() && !options.is_object())
    throw InputError(json_path + ": expected an object of cpu backend options, found " + options.dump());
  CpuOptions o;
  fields::parse_into(o, options, json_path, "key for backend 'cpu'");
  int threads = o.host.threads;
  if (threads < 1) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  const vec::Isa isa = o.host.isa(json_path, /*scalar_ok=*/false);
  return std::make_unique<CpuBackend>(threads, isa, o.decode_tuning);
}

}  // namespace mha
