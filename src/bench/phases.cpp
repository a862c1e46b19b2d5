#include "bench/phases.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "run/passes.h"

namespace mha::bench {

namespace {

// x[:, start:start+n, :] as its own float32 tensor.
Tensor slice_rows(const Tensor& x, int64_t start, int64_t n) {
  const int64_t b = x.dim(0), s = x.dim(1), h = x.dim(2);
  Tensor out(DType::F32, {b, n, h});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < b; ++i)
    std::memcpy(dst + i * n * h, src + (i * s + start) * h, static_cast<size_t>(n * h) * sizeof(float));
  return out;
}

// The cache bytes a one-token step at the session's length read: what the
// cache holds, or on a windowed (sliding) layer only its window's rows, the
// keys the step sees.
double step_cache_bytes(const AttentionSpec& spec, const DecodeSession& s) {
  const double held = static_cast<double>(s.cache_bytes());
  const int64_t len = s.length();
  return spec.window > 0 && len > spec.window ? held * static_cast<double>(spec.window) / static_cast<double>(len)
                                              : held;
}

}  // namespace

double append_attention_flops(const AttentionSpec& spec, int64_t batch, int64_t cached, int64_t rows) {
  double keys = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t k = cached + i + 1;
    if (spec.window > 0) k = std::min(k, spec.window);
    keys += static_cast<double>(k + spec.extra_keys());
  }
  // MLA decodes in the absorbed form: scores over the latent rows, values their first kv_lora_rank columns.
  const double widths = spec.mla ? static_cast<double>(spec.mla->latent_width() + spec.mla->kv_lora_rank)
                                 : static_cast<double>(spec.head_dim + spec.head_dim_v);
  return 2.0 * batch * spec.num_heads * keys * widths;
}

double append_flops(const AttentionSpec& spec, int64_t batch, int64_t cached, int64_t rows) {
  const double h = spec.num_heads, hkv = spec.num_kv_heads, dh = spec.head_dim, dv = spec.head_dim_v;
  double proj = spec.q_in() * h * dh + spec.k_in() * hkv * dh + spec.v_in() * hkv * dv;
  if (spec.mla) {  // q (q_a, q_b), the latent row, each head's absorption into and out of the latent space
    const Mla& m = *spec.mla;
    const double kl = static_cast<double>(m.kv_lora_rank);
    proj = m.q_b ? spec.q_in() * static_cast<double>(m.q_lora_rank) + static_cast<double>(m.q_lora_rank) * h * dh
                 : spec.q_in() * h * dh;
    proj += spec.k_in() * static_cast<double>(m.latent_width()) + h * kl * (static_cast<double>(m.nope_dim) + dv);
  }
  if (spec.out) proj += h * dv * spec.out_dim();
  return 2.0 * batch * rows * proj + append_attention_flops(spec, batch, cached, rows);
}

PhaseRun run_phase(const AttentionSpec& spec, const TensorMap& weights, Backend& backend, const Row& row,
                   const Tensor& x, int64_t warmup, int64_t repetitions) {
  const bool generate = row.phase == Phase::Generate;
  std::vector<Tensor> timed;  // the prompt, or one tensor per step
  if (generate)
    for (int64_t i = 0; i < row.seq; ++i) timed.push_back(slice_rows(x, i, 1));
  else
    timed.push_back(x);
  double weight_bytes = 0;
  for (const auto& [name, t] : weights) weight_bytes += 4.0 * t.numel();

  DecodeOptions opt;
  opt.cache_dtype = row.cache_dtype;
  opt.batch = row.batch;
  opt.max_tokens = row.depth + row.seq;
  PhaseRun pr;
  pr.timing.flops = append_flops(spec, row.batch, row.depth, row.seq);
  pr.attention_flops = append_attention_flops(spec, row.batch, row.depth, row.seq);
  if (generate) pr.timing.flops = pr.attention_flops = 0;
  for (int64_t i = 0; generate && i < row.seq; ++i) {
    pr.timing.flops += append_flops(spec, row.batch, row.depth + i, 1);
    pr.attention_flops += append_attention_flops(spec, row.batch, row.depth + i, 1);
  }
  // The depth's keys and values are pseudo-random, not a prefill's: a
  // step's work does not depend on the values, and a 32768-token depth then
  // costs no prefill per run. Filled before the timed appends.
  std::unique_ptr<DecodeSession> session;
  auto before = [&](const Pass& p) {
    session = backend.start_decode(spec, opt);
    if (row.depth > 0) session->fill_synthetic(row.depth, static_cast<uint64_t>(p.index));
  };
  double cache_bytes = 0;
  std::vector<double> attention_ms, attention_cpu_ms;  // per timed pass
  auto steps = [&](const Pass& p) {
    cache_bytes = 0;
    const DecodeSession::AttentionTime a0 = session->attention_time();
    for (const Tensor& t : timed) {
      session->append(t);
      // Read after the step outside of its work (a getter): what the step
      // read from the cache, its own new row included.
      if (generate) cache_bytes += step_cache_bytes(spec, *session);
    }
    if (p.timed && a0.wall_s >= 0) {
      const DecodeSession::AttentionTime a1 = session->attention_time();
      attention_ms.push_back(1e3 * (a1.wall_s - a0.wall_s));
      attention_cpu_ms.push_back(1e3 * (a1.cpu_s - a0.cpu_s));
    }
  };
  time_passes(pr.timing, warmup, repetitions, steps, before);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  if (!attention_ms.empty()) pr.attention_ms = median(attention_ms), pr.attention_cpu_ms = median(attention_cpu_ms);
  if (generate) pr.bytes_per_token = weight_bytes + cache_bytes / row.seq;
  return pr;
}

DecodeError phase_error(const AttentionSpec& spec, Backend& backend, const Row& row, const Tensor& x) {
  const int64_t n = std::min(row.seq, kErrorTokens), O = spec.out_dim();
  DecodeOptions opt;
  opt.cache_dtype = row.cache_dtype, opt.batch = row.batch, opt.max_tokens = row.depth + n;
  std::unique_ptr<DecodeSession> session = backend.start_decode(spec, opt);
  if (row.depth > 0) session->fill_synthetic(row.depth, 0);
  std::vector<Tensor> steps;
  std::vector<double> out(row.batch * n * O);
  for (int64_t i = 0; i < n; ++i) {
    steps.push_back(slice_rows(x, i, 1));
    const std::vector<double> y = session->append(steps.back()).to_f64();
    for (int64_t b = 0; b < row.batch; ++b) std::copy_n(y.begin() + b * O, O, out.begin() + (b * n + i) * O);
  }
  session.reset();  // its cache is freed before the reference allocates its own
  return decode_error_vs_float64(spec, row.batch, row.depth, 0, steps, Tensor::from_f64({row.batch, n, O}, out));
}

}  // namespace mha::bench
