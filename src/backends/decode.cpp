#include "backends/decode.h"

#include "backends/cpu/kv_format.h"

#include "tensor/tensor.h"
#include "util/checked_size.h"
#include "util/error.h"

namespace mha {

std::optional<std::string> decode_unsupported(const AttentionSpec& spec) {
  if (!spec.causal) return std::string("decode needs causal attention (a KV cache serves causal self-attention only)");
  if (spec.extra_keys() > 0)
    return std::string("decode needs no extra key rows (bias_k / add_zero_attn), found ") +
           std::to_string(spec.extra_keys());
  if (spec.q_in() != spec.k_in() || spec.q_in() != spec.v_in())
    return "decode needs self-attention: query, key and value widths " + std::to_string(spec.q_in()) + ", " +
           std::to_string(spec.k_in()) + ", " + std::to_string(spec.v_in()) + " differ";
  return std::nullopt;
}

namespace {

// MLA's latent cache: one row of kv_lora_rank + rope_dim values per
// position and batch row, whose c and kr parts each fill whole blocks of the
// format (the absorbed form reads c alone as the values).
void check_latent_cache(const AttentionSpec& spec, const DecodeOptions& opt) {
  const Mla& m = *spec.mla;
  if (auto e = kv_width_unsupported(opt.cache_dtype, m.kv_lora_rank, "kv_lora_rank")) throw InputError("decode: " + *e);
  if (auto e = kv_width_unsupported(opt.cache_dtype, m.rope_dim, "qk_rope_head_dim")) throw InputError("decode: " + *e);
  const std::string what = "decode: latent cache of " + field("batch", opt.batch) + " x " +
                           field("positions", opt.max_tokens) + " x " + field("latent width", m.latent_width());
  const int64_t rows = checked_mul(opt.batch, opt.max_tokens, what);
  // float64 at worst (the reference's rows).
  check_fits_memory(checked_mul(rows, checked_mul(m.latent_width(), 8, what), what), what);
}

}  // namespace

void check_decode_options(const AttentionSpec& spec, const DecodeOptions& opt) {
  validate_spec_features(spec);
  if (opt.batch < 1) throw InputError("decode: batch must be at least 1, found " + std::to_string(opt.batch));
  if (opt.max_tokens < 1)
    throw InputError("decode: max_tokens must be at least 1, found " + std::to_string(opt.max_tokens));
  if (spec.mla) return check_latent_cache(spec, opt);
  // The cache is allocated up front: K and V of every position, batch row and
  // key/value head, refused here when it overflows or exceeds the machine.
  const std::string what = "decode: KV cache of " + field("batch", opt.batch) + " x " +
                           field("positions", opt.max_tokens) + " x " + field("kv heads", spec.num_kv_heads) + " x " +
                           field("head widths", spec.head_dim + spec.head_dim_v);
  if (auto e = kv_width_unsupported(opt.cache_dtype, spec.head_dim)) throw InputError("decode: " + *e);
  if (auto e = kv_width_unsupported(opt.cache_dtype, spec.head_dim_v, "head_dim_v"))
    throw InputError("decode: " + *e);
  const int64_t rows = checked_mul(opt.batch, opt.max_tokens, what);
  const int64_t per_row = checked_mul(
      spec.num_kv_heads, kv_row_bytes(opt.cache_dtype, spec.head_dim) + kv_row_bytes(opt.cache_dtype, spec.head_dim_v),
      what);
  check_fits_memory(checked_mul(rows, per_row, what), what);
}

void check_append(const AttentionSpec& spec, const DecodeOptions& opt, int64_t length, const Tensor& x) {
  if (x.ndim() != 3 || x.dim(0) != opt.batch || x.dim(2) != spec.q_in() || x.dim(1) < 1)
    throw InputError("decode append: expected x of shape [" + std::to_string(opt.batch) + ", n >= 1, " +
                     std::to_string(spec.q_in()) + "], found " + shape_str(x.shape()));
  if (x.dtype() != DType::F32 && x.dtype() != DType::F64)
    throw InputError(std::string("decode append: expected float32 or float64 x, found ") + dtype_name(x.dtype()));
  if (length + x.dim(1) > opt.max_tokens)
    throw InputError("decode append: " + std::to_string(x.dim(1)) + " more tokens after " + std::to_string(length) +
                     " exceed the cache's max_tokens " + std::to_string(opt.max_tokens));
}

void check_fill(const DecodeOptions& opt, int64_t length, int64_t n) {
  if (n < 0 || length + n > opt.max_tokens)
    throw InputError("decode fill: " + std::to_string(n) + " positions after " + std::to_string(length) +
                     " exceed the cache's max_tokens " + std::to_string(opt.max_tokens));
}

}  // namespace mha
