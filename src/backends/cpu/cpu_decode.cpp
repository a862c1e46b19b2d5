// The cpu KV-cache session. One append of n rows:
//   x [B, n, q_in] -> [q | k | v] = x . [Wq; Wk; Wv]^T + b   [B*n, Eq+Ek+Ev]
//     (one row: a GEMV split over output columns across the pool, since it
//      only streams the weights once; more rows: the pool's sgemm)
//   QK norm, then rope at positions len .. len+n-1, on q and k
//     (model/qk_norm.h, model/rope.h)
//   k, v -> cache [B, Hkv, max_tokens] rows of d elements in the session's
//      cache_dtype (kv_format.h); the float32 copies are rounded through the
//      format too, so every query attends to the values the cache holds
//   attention -> context [B*n, H*dv]:
//     several rows (a prompt, at any depth): the flash kernel over the
//       cache (cpu_decode_prefill.h), O(n*d) memory;
//     one row: per (batch, kv head, chunk of keys) the chunk kernel
//       (cpu_decode_kernel.h) reads each cached key/value row once for all
//       query heads of the group, and the chunks' online-softmax partials
//       are merged (split-K, so a single token still spreads over threads)
//     with softcap, or sinks on several rows (neither kernel has them):
//       plain_attention, scores and softmax per row over the widened cache
//       rows; one row's sinks join the chunks' merge
//   output = context . Wo^T + bo (GEMV / sgemm as above)
// Multi-head latent attention (spec.mla) keeps one latent row [c | kr] per
// position instead (append_mla): the flash kernel reads it as one key head
// of kv_lora_rank + dr columns whose values are its first kv_lora_rank, with
// the heads' queries, absorbed into the latent space (cpu_mla.h), as its
// query rows (latent_attention, cpu_decode_prefill.h).
#include "backends/cpu/cpu_decode.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_decode_prefill.h"
#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_mla.h"
#include "backends/cpu/cpu_projection.h"
#include "backends/cpu/kv_format.h"
#include "model/mask.h"
#include "model/qk_norm.h"
#include "model/rope.h"
#include "util/huge_pages.h"

namespace mha::cpu {

namespace {

constexpr int64_t kMinChunk = 256;  // keys per chunk at least: below it the merge costs more than it spreads

// y[out] = W[out, in] . x[in] + b, output columns split across the pool in
// blocks of whole 16-row groups, each an OpenBLAS sgemv on its own thread.
void gemv(ThreadPool& pool, const PackedLinear& lin, const float* x, float* y) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(4 * pool.size(), lin.out / 64));
  const int64_t step = (lin.out / parts + 15) / 16 * 16;
  pool.parallel_for(parts, [&](int64_t t, int) {
    const int64_t lo = std::min(lin.out, t * step), hi = t == parts - 1 ? lin.out : std::min(lin.out, lo + step);
    if (hi <= lo) return;
    const bool bias = !lin.b.empty();
    if (bias) std::memcpy(y + lo, lin.b.data() + lo, sizeof(float) * (hi - lo));
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(hi - lo), static_cast<blasint>(lin.in), 1.0f,
                lin.w.data() + lo * lin.in, static_cast<blasint>(lin.in), x, 1, bias ? 1.0f : 0.0f, y + lo, 1);
  });
}

double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

void decode_project_rows(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t rows, float* y) {
  if (rows == 1)
    gemv(pool, lin, x, y);
  else
    linear(pool, lin, x, lin.in, rows, y, lin.out);
}

namespace {

struct ChunkTask {
  int64_t b, r, g, j0, j1, slot;
};

class CpuDecode : public DecodeSession {
 public:
  CpuDecode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool, vec::Isa isa, DecodeTuner* tuner)
      : spec_(spec), opt_(opt), pool_(pool), rule_(spec), isa_(isa),
        kernel_(decode_kernel_for(isa)), tuner_(tuner),
        qkv_(spec.mla ? PackedLinear{} : pack_stacked({&spec.q, &spec.k, &spec.v})),
        // MLA: one latent row [c | kr] per position, read as a single key
        // head whose values are its first kv_lora_rank columns.
        hkv_(spec.mla ? 1 : spec.num_kv_heads), kd_(spec.mla ? spec.mla->latent_width() : spec.head_dim),
        vd_(spec.mla ? spec.mla->kv_lora_rank : spec.head_dim_v), kbytes_(kv_row_bytes(opt.cache_dtype, kd_)),
        vbytes_(spec.mla ? kbytes_ : kv_row_bytes(opt.cache_dtype, vd_)) {
    if (spec.out && !spec.mla) out_ = pack_linear(*spec.out);
    if (spec.mla) mla_ = pack_mla(spec);
    const int64_t rows = opt.batch * hkv_ * opt.max_tokens;
    // Allocated once, uninitialised: pages are touched as rows are appended.
    k_.reset(new unsigned char[rows * kbytes_]);
    advise_huge_pages(k_.get(), rows * kbytes_);
    if (!spec.mla) {
      v_.reset(new unsigned char[rows * vbytes_]);
      advise_huge_pages(v_.get(), rows * vbytes_);
    }
    scratch_.resize(pool.size());
  }

  int64_t length() const override { return len_; }
  AttentionTime attention_time() const override { return attention_; }
  int64_t cache_bytes() const override { return opt_.batch * hkv_ * len_ * (kbytes_ + (mla_ ? 0 : vbytes_)); }

  Tensor append(const Tensor& x_in) override {
    check_append(spec_, opt_, len_, x_in);
    SerialBlasScope serial_blas;  // the pool's threads are the only ones busy (cpu_gemm.h)
    if (mla_) return append_mla(x_in);
    const int64_t B = opt_.batch, n = x_in.dim(1), rows = B * n;
    const int64_t H = spec_.num_heads, Hkv = spec_.num_kv_heads, dh = spec_.head_dim, dv = spec_.head_dim_v;
    const int64_t Eq = H * dh, E = qkv_.out;
    std::vector<float> tmp;
    const float* x = x_in.dtype() == DType::F32 ? x_in.data<float>() : (tmp = x_in.to_f32()).data();

    proj_.resize(rows * E);
    decode_project_rows(pool_, qkv_, x, rows, proj_.data());
    if (spec_.rope || norm_) {
      const std::optional<RopeTable> t = spec_.rope ? std::optional<RopeTable>(rope_table_at(spec_, len_, n)) : std::nullopt;
      pool_.parallel_for((rows + 63) / 64, [&](int64_t c, int) {
        const int64_t r0 = c * 64, m = std::min<int64_t>(64, rows - r0);
        if (norm_) {
          apply_qk_norm_rows(norm_->q, norm_->eps, proj_.data() + r0 * E, E, m, H, dh);
          apply_qk_norm_rows(norm_->k, norm_->eps, proj_.data() + r0 * E + Eq, E, m, Hkv, dh);
        }
        if (!t) return;
        apply_rope_rows(*t, proj_.data() + r0 * E, E, r0, m, H);
        apply_rope_rows(*t, proj_.data() + r0 * E + Eq, E, r0, m, Hkv);
      });
    }
    store_kv(n);

    ctx_.resize(rows * H * dv);
    if (n == 1 && !tuned_) choose_tuning();  // the kernel's first use: untimed
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    // Softcap anywhere, and sinks in a prompt, need the plain loop; a single
    // row's sinks join the chunk kernel's merge.
    if (spec_.softcap > 0.0 || (spec_.sinks && n > 1))
      plain_attention(n);
    else if (n > 1)
      prefill(n);
    else
      cached_attention(n, proj_.data(), E);
    attention_.cpu_s += process_cpu_seconds() - c0;
    attention_.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    len_ += n;

    Tensor out(DType::F32, {B, n, spec_.out_dim()});
    if (out_)
      decode_project_rows(pool_, *out_, ctx_.data(), rows, out.data<float>());
    else
      std::memcpy(out.data<float>(), ctx_.data(), sizeof(float) * rows * H * dv);
    return out;
  }

  void fill_synthetic(int64_t n, uint64_t seed) override {
    check_fill(opt_, len_, n);
    const int64_t T = opt_.max_tokens, dh = kd_, dv = vd_;
    pool_.parallel_for(opt_.batch * hkv_, [&](int64_t bg, int) {
      std::vector<float> row(std::max(dh, dv));
      for (int64_t j = len_; j < len_ + n; ++j) {
        for (int64_t d = 0; d < dh; ++d) row[d] = synthetic_value(seed, 2 * ((bg * T + j) * dh + d));
        kv_encode_row(opt_.cache_dtype, row.data(), dh, k_.get() + (bg * T + j) * kbytes_);
        if (mla_) continue;  // the values are the latent rows' first columns
        for (int64_t d = 0; d < dv; ++d) row[d] = synthetic_value(seed, 2 * ((bg * T + j) * dv + d) + 1);
        kv_encode_row(opt_.cache_dtype, row.data(), dv, v_.get() + (bg * T + j) * vbytes_);
      }
    });
    len_ += n;
  }

 private:
  // Rows len_ .. len_+n-1 of k and v (columns Eq.. of proj_) into the
  // cache, and the cached values back into proj_ (what the prompt's flash
  // pass and later rows of this append attend to).
  void store_kv(int64_t n) {
    const int64_t B = opt_.batch, T = opt_.max_tokens, H = spec_.num_heads, Hkv = spec_.num_kv_heads;
    const int64_t dh = spec_.head_dim, dv = spec_.head_dim_v, E = qkv_.out, Eq = H * dh, Ek = Hkv * dh;
    pool_.parallel_for(B * n, [&](int64_t row, int) {
      const int64_t b = row / n, r = row % n;
      float* p = proj_.data() + row * E;
      for (int64_t g = 0; g < Hkv; ++g) {
        float* kp = p + Eq + g * dh;
        float* vp = p + Eq + Ek + g * dv;
        const int64_t slot = (b * Hkv + g) * T + len_ + r;
        unsigned char* kc = k_.get() + slot * kbytes_;
        unsigned char* vc = v_.get() + slot * vbytes_;
        kv_encode_row(opt_.cache_dtype, kp, dh, kc);
        kv_encode_row(opt_.cache_dtype, vp, dv, vc);
        if (opt_.cache_dtype != CacheDtype::Float32) {
          kv_rows_to_f32(opt_.cache_dtype, kc, 1, dh, kp, dh);
          kv_rows_to_f32(opt_.cache_dtype, vc, 1, dv, vp, dv);
        }
      }
    });
  }

  // MLA's absorbed form (cpu_mla.h): q and the latent rows, the latent rows
  // into the cache (which the attention then reads, as it holds them), each query head
  // absorbed into the latent space, the flash kernel over the cache as one
  // key head of kl + dr columns whose values are its first kl
  // (latent_attention), then each head's latent context expanded by W_vb_h
  // and the output projection.
  // Every append, a prompt's included, attends this way.
  Tensor append_mla(const Tensor& x_in) {
    const int64_t B = opt_.batch, n = x_in.dim(1), rows = B * n, T = opt_.max_tokens, H = spec_.num_heads;
    std::vector<float> tmp;
    const float* x = x_in.dtype() == DType::F32 ? x_in.data<float>() : (tmp = x_in.to_f32()).data();
    mla_project(pool_, spec_, *mla_, rope_table_at(spec_, len_, n), x, rows, mla_q_, mla_ckv_);
    pool_.parallel_for(rows, [&](int64_t row, int) {
      float* lat = mla_ckv_.data() + row * kd_;
      unsigned char* kc = k_.get() + ((row / n) * T + len_ + row % n) * kbytes_;
      kv_encode_row(opt_.cache_dtype, lat, kd_, kc);
    });
    mla_qa_.resize(rows * H * kd_);
    mla_absorb_query(pool_, spec_, *mla_, mla_q_.data(), rows, mla_qa_.data());
    ctx_.resize(rows * H * vd_);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    LatentArgs a;
    a.cache.dtype = opt_.cache_dtype, a.cache.k = a.cache.v = k_.get(), a.cache.vbytes = kbytes_;
    a.cache.Hkv = 1, a.cache.T = T, a.cache.dh = kd_, a.cache.dv = vd_;
    a.rule = rule_, a.scale = static_cast<float>(spec_.scale);
    a.B = B, a.H = H, a.n = n, a.len = len_;
    a.qa = mla_qa_.data(), a.ctx = ctx_.data();
    a.isa = isa_;
    latent_attention(pool_, a, flash_);
    attention_.cpu_s += process_cpu_seconds() - c0;
    attention_.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    len_ += n;
    std::vector<float>& ctx = mla_q_;  // q is spent: it holds the expanded context
    ctx.resize(rows * H * spec_.head_dim_v);
    mla_expand_context(pool_, spec_, *mla_, ctx_.data(), rows, ctx.data());
    Tensor out(DType::F32, {B, n, spec_.out_dim()});
    if (mla_->out)
      decode_project_rows(pool_, *mla_->out, ctx.data(), rows, out.data<float>());
    else
      std::copy(ctx.begin(), ctx.end(), out.data<float>());
    return out;
  }

  // Several rows (a prompt, at any depth): the flash kernel over the
  // cache (cpu_decode_prefill.h).
  void prefill(int64_t n) {
    PrefillArgs p;
    p.cache.dtype = opt_.cache_dtype, p.cache.k = k_.get(), p.cache.v = v_.get();
    p.cache.Hkv = spec_.num_kv_heads, p.cache.T = opt_.max_tokens;
    p.cache.dh = spec_.head_dim, p.cache.dv = spec_.head_dim_v;
    p.rule = rule_, p.scale = static_cast<float>(spec_.scale);
    p.B = opt_.batch, p.H = spec_.num_heads, p.n = n, p.len = len_;
    p.q = proj_.data(), p.ldq = qkv_.out;
    p.ctx = ctx_.data(), p.ldc = spec_.num_heads * spec_.head_dim_v;
    p.isa = isa_;
    prefill_attention(pool_, p, flash_);
  }

  // The tuner's choice for this session's shape (a calibration, once per
  // machine and shape), else the kernel's defaults.
  void choose_tuning() {
    const DecodeShape shape{opt_.cache_dtype, spec_.num_heads / hkv_, kd_, vd_};
    const int64_t bytes = opt_.batch * hkv_ * opt_.max_tokens * (kbytes_ + vbytes_);
    tune_ = tuner_ ? tuner_->tuning_for(kernel_, shape, pool_, bytes).tune : DecodeTuning{};
    tuned_ = true;
  }

  // Each new row r (position len_ + r) against the cache's keys it sees;
  // its query heads are row r of q (stride E), the context goes to ctx_.
  void cached_attention(int64_t n, const float* q, int64_t E) {
    const int64_t B = opt_.batch, T = opt_.max_tokens, H = spec_.num_heads, Hkv = hkv_;
    const int64_t dh = kd_, dv = vd_, G = H / Hkv;
    const unsigned char* vc = v_.get();
    // Split each row's keys so that a single token still gives every thread work.
    const int64_t groups = B * n * Hkv;
    const int64_t want = std::max<int64_t>(1, (2 * pool_.size() + groups - 1) / groups);
    tasks_.clear();
    row_first_.assign(B * n * Hkv + 1, 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t g = 0; g < Hkv; ++g) {
          const int64_t p = len_ + r, j0 = rule_.first_key(p), j1 = p + 1, vis = j1 - j0;
          const int64_t parts = std::max<int64_t>(1, std::min(want, vis / kMinChunk));
          const int64_t step = (vis + parts - 1) / parts;
          row_first_[(b * n + r) * Hkv + g] = static_cast<int64_t>(tasks_.size());
          for (int64_t c = j0; c < j1; c += step)
            tasks_.push_back({b, r, g, c, std::min(j1, c + step), static_cast<int64_t>(tasks_.size())});
        }
    row_first_.back() = static_cast<int64_t>(tasks_.size());
    const int64_t per = G * (dv + 2);  // one partial: o [G, dv], m [G], l [G]
    partial_.resize(tasks_.size() * per);
    const float scale_log2 = static_cast<float>(spec_.scale) * kLog2e;
    pool_.parallel_for(static_cast<int64_t>(tasks_.size()), [&](int64_t i, int thread) {
      const ChunkTask& t = tasks_[i];
      Scratch& s = scratch_[thread];
      s.s.resize(std::max<std::size_t>(s.s.size(), G * (t.j1 - t.j0)));
      float* part = partial_.data() + t.slot * per;
      DecodeChunk c;
      c.q = q + (t.b * n + t.r) * E + t.g * G * dh;
      c.k = k_.get() + (t.b * Hkv + t.g) * T * kbytes_;
      c.v = vc + (t.b * Hkv + t.g) * T * vbytes_;
      c.dt = opt_.cache_dtype, c.kbytes = kbytes_, c.vbytes = vbytes_;
      c.j0 = t.j0, c.j1 = t.j1, c.G = G, c.dh = dh, c.dv = dv, c.scale_log2 = scale_log2;
      c.s = s.s.data();
      c.tune = tune_;
      c.o = part, c.m = part + G * dv, c.l = part + G * dv + G;
      kernel_(c);
    });
    // Merge each (row, group)'s chunks, a head's sink (base-2 units, as the
    // partials' maxima) with them.
    pool_.parallel_for(B * n * Hkv, [&](int64_t rg, int) {
      const int64_t row = rg / Hkv, g = rg % Hkv, first = row_first_[rg], last = row_first_[rg + 1];
      for (int64_t h = 0; h < G; ++h) {
        const float* part = partial_.data() + first * per;
        merge_chunk_contexts(last - first, dv, part + h * dv, per, part + G * dv + h, part + G * dv + G + h, per,
                             sinks_.empty() ? -INFINITY : sinks_[g * G + h] * kLog2e,
                             ctx_.data() + row * H * dv + (g * G + h) * dv);
      }
    });
  }

  // Softcap and sinks, which neither the flash nor the chunk kernel has:
  // per (batch, new row, kv group) the visible keys' rows widened from the
  // cache kPlainKeys at a time, every head's scores, the softcap, the
  // softmax with the head's sink in its denominator, then P.V over the
  // widened value rows. Slower than the kernels, and as exact.
  void plain_attention(int64_t n) {
    constexpr int64_t kPlainKeys = 256;
    const int64_t B = opt_.batch, T = opt_.max_tokens, H = spec_.num_heads, Hkv = spec_.num_kv_heads;
    const int64_t dh = spec_.head_dim, dv = spec_.head_dim_v, G = H / Hkv, E = qkv_.out;
    const float scale = static_cast<float>(spec_.scale), cap = static_cast<float>(spec_.softcap);
    pool_.parallel_for(B * n * Hkv, [&](int64_t task, int thread) {
      const int64_t b = task / (n * Hkv), r = task / Hkv % n, g = task % Hkv;
      const int64_t p = len_ + r, j0 = rule_.first_key(p), vis = p + 1 - j0;
      std::vector<float>& w = scratch_[thread].s;
      std::vector<float>& rows = scratch_[thread].rows;
      w.resize(G * vis);
      rows.resize(kPlainKeys * std::max(dh, dv));
      const unsigned char* kc = k_.get() + ((b * Hkv + g) * T + j0) * kbytes_;
      const unsigned char* vc = v_.get() + ((b * Hkv + g) * T + j0) * vbytes_;
      const float* q = proj_.data() + (b * n + r) * E + g * G * dh;
      for (int64_t c = 0; c < vis; c += kPlainKeys) {
        const int64_t m = std::min(kPlainKeys, vis - c);
        kv_rows_to_f32(opt_.cache_dtype, kc + c * kbytes_, m, dh, rows.data(), dh);
        for (int64_t h = 0; h < G; ++h)
          for (int64_t j = 0; j < m; ++j) {
            float dot = 0.0f;
            for (int64_t d = 0; d < dh; ++d) dot += q[h * dh + d] * rows[j * dh + d];
            float x = scale * dot;
            w[h * vis + c + j] = cap > 0.0f ? cap * std::tanh(x / cap) : x;
          }
      }
      for (int64_t h = 0; h < G; ++h) {
        float* wh = w.data() + h * vis;
        const float* sink = sinks_.empty() ? nullptr : &sinks_[g * G + h];
        float mx = sink ? *sink : -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < vis; ++j) mx = std::max(mx, wh[j]);
        if (sink) sum = std::exp(*sink - mx);
        for (int64_t j = 0; j < vis; ++j) sum += (wh[j] = std::exp(wh[j] - mx));
        for (int64_t j = 0; j < vis; ++j) wh[j] /= sum;
        std::fill_n(ctx_.data() + (b * n + r) * H * dv + (g * G + h) * dv, dv, 0.0f);
      }
      for (int64_t c = 0; c < vis; c += kPlainKeys) {
        const int64_t m = std::min(kPlainKeys, vis - c);
        kv_rows_to_f32(opt_.cache_dtype, vc + c * vbytes_, m, dv, rows.data(), dv);
        for (int64_t h = 0; h < G; ++h) {
          float* ctx = ctx_.data() + (b * n + r) * H * dv + (g * G + h) * dv;
          for (int64_t j = 0; j < m; ++j)
            for (int64_t d = 0; d < dv; ++d) ctx[d] += w[h * vis + c + j] * rows[j * dv + d];
        }
      }
    });
  }

  struct Scratch {
    std::vector<float> s, rows;
  };

  AttentionSpec spec_;  // Tensors share their bytes: a cheap copy
  DecodeOptions opt_;
  std::optional<QkNormWeights<float>> norm_ = qk_norm_weights<float>(spec_);
  std::vector<float> sinks_ = spec_.sinks ? spec_.sinks->to_f32() : std::vector<float>();
  ThreadPool& pool_;
  MaskRule rule_;
  vec::Isa isa_;
  DecodeKernel kernel_;
  DecodeTuner* tuner_;  // nullptr: the kernel's defaults
  DecodeTuning tune_;
  bool tuned_ = false;
  PackedLinear qkv_;  // empty with MLA (mla_ holds its projections)
  std::optional<PackedLinear> out_;
  std::optional<MlaPacked> mla_;
  int64_t hkv_, kd_, vd_;  // the cache's key heads and row widths: the spec's, or MLA's latent (1, kl + dr, kl)
  int64_t kbytes_, vbytes_;                 // one cached K / V row (kv_row_bytes); MLA: the latent row, twice
  std::unique_ptr<unsigned char[]> k_, v_;  // [B, Hkv, max_tokens] rows of kbytes_ / vbytes_
  int64_t len_ = 0;
  AttentionTime attention_{0, 0};
  // Per-append workspaces, kept between appends so steps allocate nothing.
  std::vector<float> proj_, ctx_, partial_;
  std::vector<float> mla_q_, mla_ckv_, mla_qa_;  // MLA: q, latent rows, absorbed queries
  std::vector<ChunkTask> tasks_;
  std::vector<int64_t> row_first_;
  std::vector<Scratch> scratch_;
  std::vector<FlashScratch> flash_;
};

}  // namespace

double decode_thread_cpu_s() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

DecodeKernel decode_kernel_for(vec::Isa isa) { return decode_kernel_set().pick(isa); }

std::unique_ptr<DecodeSession> make_cpu_decode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool,
                                               vec::Isa isa, DecodeTuner* tuner) {
  return std::make_unique<CpuDecode>(spec, opt, pool, isa, tuner);
}

}  // namespace mha::cpu
