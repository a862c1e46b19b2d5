#include "run/decode_error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "backends/reference/reference_backend.h"

namespace mha {

std::optional<std::string> decode_error_too_costly(const AttentionSpec& spec, int64_t batch, int64_t depth,
                                                   int64_t rows) {
  // MLA's reference keeps one latent row per position and attends over it
  // with its whole width for the scores and kv_lora_rank for the values.
  const double widths = spec.mla ? static_cast<double>(spec.mla->latent_width() + spec.mla->kv_lora_rank)
                                 : static_cast<double>(spec.head_dim + spec.head_dim_v);
  const double row = spec.mla ? static_cast<double>(spec.mla->latent_width()) : spec.num_kv_heads * widths;
  const double bytes = 8.0 * batch * static_cast<double>(depth + rows) * row;
  double keys = 0;  // keys each appended row attends, summed
  for (int64_t i = 0; i < rows; ++i) {
    double k = static_cast<double>(depth + i + 1);
    if (spec.window > 0) k = std::min(k, static_cast<double>(spec.window));
    keys += k;
  }
  const double flops = 2.0 * batch * spec.num_heads * keys * widths;
  auto gb = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", x / 1e9);
    return std::string(b);
  };
  if (bytes > kErrorMaxBytes)
    return "float64 reference would hold " + gb(bytes) + " GB of cache (limit " + gb(kErrorMaxBytes) + " GB)";
  if (flops > kErrorMaxFlops)
    return "float64 reference would cost " + gb(flops) + " GFLOP of attention (limit " + gb(kErrorMaxFlops) + ")";
  return std::nullopt;
}

DecodeError decode_error_vs_float64(const AttentionSpec& spec, int64_t batch, int64_t depth, uint64_t seed,
                                    const std::vector<Tensor>& appends, const Tensor& out) {
  int64_t rows = 0;
  for (const Tensor& a : appends) rows += a.dim(1);
  auto ref = make_reference_backend();
  DecodeOptions opt;
  opt.cache_dtype = CacheDtype::Float32, opt.batch = batch, opt.max_tokens = depth + rows;
  std::unique_ptr<DecodeSession> s = ref->start_decode(spec, opt);
  if (depth > 0) s->fill_synthetic(depth, seed);
  const std::vector<double> got = out.to_f64();
  const int64_t O = spec.out_dim();
  if (static_cast<int64_t>(got.size()) != batch * rows * O)
    throw std::logic_error("decode_error_vs_float64: output of " + std::to_string(got.size()) + " values, expected " +
                        std::to_string(batch * rows * O));
  DecodeError e;
  e.rows = rows;
  double diff2 = 0, ref2 = 0;
  int64_t r0 = 0;
  for (const Tensor& a : appends) {
    const int64_t n = a.dim(1);
    const std::vector<double> want = s->append(a).to_f64();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n * O; ++i) {
        const double w = want[b * n * O + i], g = got[(b * rows + r0) * O + i], d = std::fabs(g - w);
        e.max_abs = std::max(e.max_abs, d);
        diff2 += d * d, ref2 += w * w;
      }
    r0 += n;
  }
  e.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : 0;
  return e;
}

}  // namespace mha
