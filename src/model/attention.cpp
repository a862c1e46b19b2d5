#include "model/attention.h"

#include <atomic>
#include <cmath>

#include "util/checked_size.h"
#include "util/error.h"

namespace mha {

const char* attention_kernel_name(AttentionKernel k) { return k == AttentionKernel::Sdpa ? "sdpa" : "ops"; }

const char* op_sequence_name(OpSequence s) {
  switch (s) {
    case OpSequence::Book: return "book";
    case OpSequence::TtnnMha: return "ttnn_mha";
    case OpSequence::TtnnMhaFused: return "ttnn_mha_fused";
  }
  return "book";
}

const char* rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None: return "default";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Llama3: return "llama3";
    case RopeScaling::Yarn: return "yarn";
  }
  return "default";
}

uint64_t new_spec_uid() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

namespace {
void expect_shape(const std::string& what, const Tensor& t, const Shape& want) {
  if (t.shape() != want)
    throw InputError(what + ": expected shape " + shape_str(want) + ", found " + shape_str(t.shape()));
}
// The projected q [B, L, H*dh], k [B, S, Hkv*dh], v [B, S, Hkv*dv] and the
// context [B, L, H*dv] every backend holds, in float64 at worst: refused when
// a product overflows or the sum exceeds physical memory. The scores
// [B, H, L, S + extra] are only checked for overflow (the flash paths never
// hold them whole).
void check_activation_sizes(const AttentionSpec& spec, int64_t b, int64_t l, int64_t s) {
  const std::string shape = field("batch", b) + ", " + field("queries", l) + ", " + field("keys", s) + ", " +
                            field("heads", spec.num_heads) + ", " + field("kv heads", spec.num_kv_heads) + ", " +
                            field("head widths", spec.head_dim) + "/" + std::to_string(spec.head_dim_v);
  const std::string what = "attention activations (" + shape + ")";
  auto prod = [&](std::initializer_list<int64_t> f) {
    int64_t n = 1;
    for (int64_t x : f) n = checked_mul(n, x, what);
    return n;
  };
  int64_t total = prod({b, l, spec.num_heads, spec.head_dim});
  total = checked_add(total, prod({b, s, spec.num_kv_heads, spec.head_dim}), what);
  total = checked_add(total, prod({b, s, spec.num_kv_heads, spec.head_dim_v}), what);
  total = checked_add(total, prod({b, l, spec.num_heads, spec.head_dim_v}), what);
  prod({b, spec.num_heads, l, checked_add(s, spec.extra_keys(), what)});
  check_bytes(total, 8, what);
}
}  // namespace

namespace {

void check_rope(const RotaryEmbedding& r, int64_t head_dim) {
  const std::string at = "rotary embedding: ";
  const int64_t rd = r.rotary_dim > 0 ? r.rotary_dim : head_dim;
  if (r.rotary_dim < 0 || rd > head_dim || rd % 2 != 0 || rd < 2)
    throw InputError(at + "expected an even rotary_dim from 2 to head_dim " + std::to_string(head_dim) + ", found " +
                     std::to_string(rd));
  if (!(r.theta > 0.0) || !std::isfinite(r.theta))
    throw InputError(at + "expected a positive theta, found " + std::to_string(r.theta));
  if (r.scaling == RopeScaling::None) return;
  const std::string kind = at + rope_scaling_name(r.scaling) + " scaling: ";
  if (!(r.factor > 0.0) || !std::isfinite(r.factor))
    throw InputError(kind + "expected a positive factor, found " + std::to_string(r.factor));
  if (!(r.attention_factor > 0.0) || !std::isfinite(r.attention_factor))
    throw InputError(kind + "expected a positive attention_factor, found " + std::to_string(r.attention_factor));
  if ((r.scaling == RopeScaling::Llama3 || r.scaling == RopeScaling::Yarn) && r.original_max_positions < 1)
    throw InputError(kind + "expected original_max_positions >= 1, found " + std::to_string(r.original_max_positions));
  if (r.scaling == RopeScaling::Llama3 && !(r.high_freq_factor > r.low_freq_factor && r.low_freq_factor > 0.0))
    throw InputError(kind + "expected 0 < low_freq_factor < high_freq_factor, found " +
                     std::to_string(r.low_freq_factor) + " and " + std::to_string(r.high_freq_factor));
  if (r.scaling == RopeScaling::Yarn && !(r.beta_fast > 0.0 && r.beta_slow > 0.0 && r.theta > 1.0))
    throw InputError(kind + "expected positive beta_fast and beta_slow and theta > 1, found " +
                     std::to_string(r.beta_fast) + ", " + std::to_string(r.beta_slow) + ", " + std::to_string(r.theta));
}

// MLA's widths against each other and every tensor's shape (Mla's comment).
void check_mla(const AttentionSpec& spec) {
  const Mla& m = *spec.mla;
  const std::string at = "mla: ";
  if (m.kv_lora_rank < 1 || m.nope_dim < 0 || m.rope_dim < 2 || m.q_lora_rank < 0)
    throw InputError(at + "expected kv_lora_rank >= 1, nope_dim >= 0, rope_dim >= 2 and q_lora_rank >= 0, found " +
                     std::to_string(m.kv_lora_rank) + ", " + std::to_string(m.nope_dim) + ", " +
                     std::to_string(m.rope_dim) + ", " + std::to_string(m.q_lora_rank));
  const int64_t H = spec.num_heads, dq = m.nope_dim + m.rope_dim, in = spec.q_in();
  if (spec.num_kv_heads != H || spec.head_dim != dq)
    throw InputError(at + "expected num_kv_heads = num_heads (" + std::to_string(H) + ") and head_dim = nope_dim + rope_dim (" +
                     std::to_string(dq) + "), found " + std::to_string(spec.num_kv_heads) + " and " +
                     std::to_string(spec.head_dim));
  if (!spec.rope || spec.rope->rotary_dim != m.rope_dim)
    throw InputError(at + "expected a rotary embedding of rotary_dim rope_dim (" + std::to_string(m.rope_dim) + ")");
  if (spec.qk_norm || spec.sinks || spec.softcap > 0.0 || spec.extra_keys() > 0 || spec.qkv_fused)
    throw InputError(at + "does not combine with qk_norm, sinks, softcap, bias_k / add_zero_attn or a fused qkv");
  if ((m.q_lora_rank > 0) != (m.q_b.has_value() && m.q_norm.has_value()))
    throw InputError(at + "q_lora_rank " + std::to_string(m.q_lora_rank) + " needs q_b and q_norm exactly when it is > 0");
  if (m.q_lora_rank > 0) {
    expect_shape("mla q (q_a_proj)", spec.q.weight, {m.q_lora_rank, in});
    expect_shape("mla q_norm", *m.q_norm, {m.q_lora_rank});
    expect_shape("mla q_b", m.q_b->weight, {checked_mul(H, dq, at + "heads x head_dim"), m.q_lora_rank});
  } else {
    expect_shape("mla q (q_proj)", spec.q.weight, {checked_mul(H, dq, at + "heads x head_dim"), in});
  }
  expect_shape("mla k (kv_a_proj_with_mqa)", spec.k.weight, {m.latent_width(), in});
  expect_shape("mla v (kv_a_proj_with_mqa)", spec.v.weight, {m.latent_width(), in});
  expect_shape("mla kv_norm", m.kv_norm, {m.kv_lora_rank});
  expect_shape("mla kv_b", m.kv_b.weight,
               {checked_mul(H, m.nope_dim + spec.head_dim_v, at + "heads x (nope_dim + head_dim_v)"), m.kv_lora_rank});
  if (!(m.eps >= 0.0) || !std::isfinite(m.eps))
    throw InputError(at + "expected a non-negative eps, found " + std::to_string(m.eps));
}

}  // namespace

void validate_spec_features(const AttentionSpec& spec) {
  if (spec.rope) check_rope(*spec.rope, spec.head_dim);
  if (spec.mla) check_mla(spec);
  if (spec.qk_norm) {
    expect_shape("qk_norm q_weight", spec.qk_norm->q_weight, {spec.head_dim});
    expect_shape("qk_norm k_weight", spec.qk_norm->k_weight, {spec.head_dim});
    if (!(spec.qk_norm->eps >= 0.0) || !std::isfinite(spec.qk_norm->eps))
      throw InputError("qk_norm: expected a non-negative eps, found " + std::to_string(spec.qk_norm->eps));
  }
  if (!(spec.softcap >= 0.0) || !std::isfinite(spec.softcap))
    throw InputError("softcap: expected 0 (none) or a positive finite cap, found " + std::to_string(spec.softcap));
  if (spec.sinks) expect_shape("sinks", *spec.sinks, {spec.num_heads});
}

void validate_inputs(const AttentionSpec& spec, const AttentionInputs& in) {
  validate_spec_features(spec);
  if (in.query.ndim() != 3) throw InputError("query: expected 3 dims [B, L, E], found " + shape_str(in.query.shape()));
  int64_t b = in.query.dim(0), l = in.query.dim(1);
  expect_shape("query", in.query, {b, l, spec.q_in()});
  if (in.key.ndim() != 3) throw InputError("key: expected 3 dims [B, S, E], found " + shape_str(in.key.shape()));
  int64_t s = in.key.dim(1);
  expect_shape("key", in.key, {b, s, spec.k_in()});
  expect_shape("value", in.value, {b, s, spec.v_in()});
  if (in.mask) {
    const Tensor& m = *in.mask;
    int64_t st = s + spec.extra_keys();
    bool ok = m.ndim() == 4 && (m.dim(0) == 1 || m.dim(0) == b) && (m.dim(1) == 1 || m.dim(1) == spec.num_heads) &&
              (m.dim(2) == l || m.dim(2) == 1) && m.dim(3) == st;
    if (!ok)
      throw InputError("attention mask: expected shape broadcastable as (" + std::to_string(b) + " or 1, " +
                       std::to_string(spec.num_heads) + " or 1, " + std::to_string(l) + " or 1, " + std::to_string(st) +
                       "), found " + shape_str(m.shape()));
  }
  check_activation_sizes(spec, b, l, s);
  if (spec.rope) {
    if (s != l)
      throw InputError("rotary embedding: expected as many keys as queries (self-attention), found " +
                       std::to_string(s) + " keys for " + std::to_string(l) + " queries");
  }
  if (in.positions) {
    const Tensor& p = *in.positions;
    if (!spec.rope) throw InputError("position ids: given, but the attention has no rotary embedding");
    if (p.dtype() != DType::I64) throw InputError("position ids: expected int64, found " + std::string(dtype_name(p.dtype())));
    if (p.ndim() != 2 || (p.dim(0) != 1 && p.dim(0) != b) || p.dim(1) != l)
      throw InputError("position ids: expected shape (" + std::to_string(b) + " or 1, " + std::to_string(l) +
                       "), found " + shape_str(p.shape()));
    const int64_t* v = p.data<int64_t>();
    for (int64_t i = 0; i < p.numel(); ++i)
      if (v[i] < 0) throw InputError("position ids: expected non-negative positions, found " + std::to_string(v[i]));
  }
}

double attention_flops(const AttentionSpec& spec, const AttentionInputs& in) {
  double b = in.query.dim(0), l = in.query.dim(1), s = in.key.dim(1);
  double h = spec.num_heads, hkv = spec.num_kv_heads, dh = spec.head_dim, dv = spec.head_dim_v;
  double proj = b * l * spec.q_in() * h * dh + b * s * spec.k_in() * hkv * dh + b * s * spec.v_in() * hkv * dv;
  if (spec.mla) {  // the expanded form's projections
    const Mla& m = *spec.mla;
    const double q = m.q_lora_rank > 0 ? spec.q_in() * double(m.q_lora_rank) + double(m.q_lora_rank) * h * dh
                                       : spec.q_in() * h * dh;
    proj = b * l * q + b * s * (spec.k_in() * double(m.latent_width()) + double(m.kv_lora_rank) * h * (m.nope_dim + dv));
  }
  if (spec.out) proj += b * l * h * dv * spec.out_dim();
  double pairs = l * (s + spec.extra_keys());
  if (spec.causal && l == s) pairs = l * (l + 1) / 2.0;
  if (spec.causal && l == s && spec.window > 0 && spec.window < l) {
    const double w = spec.window;  // rows i < w see i + 1 keys, the rest w
    pairs = w * (w + 1) / 2.0 + (l - w) * w;
  }
  double attn = b * h * pairs * (dh + dv);
  return 2.0 * (proj + attn);
}

}  // namespace mha
