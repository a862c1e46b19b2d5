#include "model/attention.h"

#include <atomic>

#include "util/error.h"

namespace mha {

const char* op_sequence_name(OpSequence s) {
  switch (s) {
    case OpSequence::Book: return "book";
    case OpSequence::TtnnMha: return "ttnn_mha";
    case OpSequence::TtnnMhaFused: return "ttnn_mha_fused";
  }
  return "book";
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
}  // namespace

void validate_inputs(const AttentionSpec& spec, const AttentionInputs& in) {
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
}

double attention_flops(const AttentionSpec& spec, const AttentionInputs& in) {
  double b = in.query.dim(0), l = in.query.dim(1), s = in.key.dim(1);
  double h = spec.num_heads, hkv = spec.num_kv_heads, dh = spec.head_dim, dv = spec.head_dim_v;
  double proj = b * l * spec.q_in() * h * dh + b * s * spec.k_in() * hkv * dh + b * s * spec.v_in() * hkv * dv;
  if (spec.out) proj += b * l * h * dv * spec.out_dim();
  double pairs = l * (s + spec.extra_keys());
  if (spec.causal && l == s) pairs = l * (l + 1) / 2.0;
  double attn = b * h * pairs * (dh + dv);
  return 2.0 * (proj + attn);
}

}  // namespace mha
