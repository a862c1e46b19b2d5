#pragma once
// Every field of an AttentionSpec, listed once. Code that treats each field
// (the wire format between ranks, head sharding, float64 narrowing) visits
// this list instead of naming fields, so a field added to AttentionSpec and
// to visit_spec() below travels, shards and narrows with the others; the
// spec_fields test fails when a member of AttentionSpec, Projection,
// RotaryEmbedding, QkNorm or Mla is missing here or in the wire format.
//
//   visit_spec(spec, f)        f(name, field&, HeadLayout) for every field but
//                              uid (a process-local identity), in declaration
//                              order; const when spec is
//   visit_projection(p, f)     f(name, field&, ProjectionAxis) for weight,
//                              bias, weight_in_out
//   for_each_tensor(field, f)  f(Tensor&) for each tensor a field holds
//                              (a QkNorm's and an Mla's included)
#include <optional>
#include <type_traits>

#include "model/attention.h"

namespace mha {

// How a field is laid out across attention heads, i.e. what a share of the
// heads [h0, h0 + h) of H (key/value heads [g0, g0 + g) of Hkv) holds of it.
enum class HeadLayout {
  Shared,         // the same for every head: the share holds it whole
  QueryCount,     // num_heads: the share's h
  KvCount,        // num_kv_heads: the share's g
  Query,          // per query head, head_dim each: [H * dh] along the projection's output
  Key,            // per key/value head, head_dim each: [Hkv * dh]
  Value,          // per key/value head, head_dim_v each: [Hkv * dv]
  QueryHead,      // one value per query head: [H]
  QueryKeyValue,  // Query, then Key, then Value, concatenated: [H*dh + Hkv*dh + Hkv*dv]
  Gathered,       // applied to every head's context at once (the output projection): no share holds it
};

// Where a projection tensor runs along its output features (the axis
// HeadLayout cuts): weight [out, in] and bias [out] by rows, weight_in_out
// [in, out] by columns.
enum class ProjectionAxis { Rows, Columns };

template <class Spec, class F>
void visit_spec(Spec& s, F&& f) {
  static_assert(std::is_same<std::remove_const_t<Spec>, AttentionSpec>::value, "visit_spec visits an AttentionSpec");
  using H = HeadLayout;
  f("variant", s.variant, H::Shared);
  f("ops", s.ops, H::Shared);
  f("attention", s.attention, H::Shared);
  f("num_heads", s.num_heads, H::QueryCount);
  f("num_kv_heads", s.num_kv_heads, H::KvCount);
  f("head_dim", s.head_dim, H::Shared);
  f("head_dim_v", s.head_dim_v, H::Shared);
  f("q", s.q, H::Query);
  f("k", s.k, H::Key);
  f("v", s.v, H::Value);
  f("out", s.out, H::Gathered);
  f("scale", s.scale, H::Shared);
  f("causal", s.causal, H::Shared);
  f("window", s.window, H::Shared);
  f("bias_k", s.bias_k, H::Key);
  f("bias_v", s.bias_v, H::Value);
  f("add_zero_attn", s.add_zero_attn, H::Shared);
  f("rope", s.rope, H::Shared);
  f("qk_norm", s.qk_norm, H::Shared);  // per head_dim, the same for every head
  f("softcap", s.softcap, H::Shared);
  f("sinks", s.sinks, H::QueryHead);
  f("dropout", s.dropout, H::Shared);
  f("qkv_fused", s.qkv_fused, H::QueryKeyValue);
  // Whole: no backend shards MLA's heads (head-parallel runs refuse it),
  // but it travels and narrows with the rest.
  f("mla", s.mla, H::Shared);
}
constexpr int kVisitedSpecFields = 24;  // every member but uid

template <class P, class F>
void visit_projection(P& p, F&& f) {
  static_assert(std::is_same<std::remove_const_t<P>, Projection>::value, "visit_projection visits a Projection");
  f("weight", p.weight, ProjectionAxis::Rows);
  f("bias", p.bias, ProjectionAxis::Rows);
  f("weight_in_out", p.weight_in_out, ProjectionAxis::Columns);
}
constexpr int kVisitedProjectionFields = 3;

// f(field&) for every member of a RotaryEmbedding / QkNorm, in declaration
// order (the wire format's), const when the struct is.
template <class R, class F>
void visit_rope(R& r, F&& f) {
  static_assert(std::is_same<std::remove_const_t<R>, RotaryEmbedding>::value, "visit_rope visits a RotaryEmbedding");
  f(r.theta), f(r.rotary_dim), f(r.interleaved), f(r.scaling), f(r.factor), f(r.low_freq_factor);
  f(r.high_freq_factor), f(r.original_max_positions), f(r.beta_fast), f(r.beta_slow), f(r.truncate);
  f(r.attention_factor);
}
constexpr int kVisitedRopeFields = 12;
template <class N, class F>
void visit_qk_norm(N& n, F&& f) {
  static_assert(std::is_same<std::remove_const_t<N>, QkNorm>::value, "visit_qk_norm visits a QkNorm");
  f(n.q_weight), f(n.k_weight), f(n.eps), f(n.offset_one);
}
constexpr int kVisitedQkNormFields = 4;

template <class M, class F>
void visit_mla(M& m, F&& f) {
  static_assert(std::is_same<std::remove_const_t<M>, Mla>::value, "visit_mla visits an Mla");
  f(m.q_lora_rank), f(m.kv_lora_rank), f(m.nope_dim), f(m.rope_dim), f(m.q_b), f(m.q_norm), f(m.kv_norm);
  f(m.kv_b), f(m.eps);
}
constexpr int kVisitedMlaFields = 9;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// f(Tensor&) (const Tensor& when the field is const) for every tensor in a
// Tensor, Projection or optional of either; nothing for other fields.
template <class Field, class F>
void for_each_tensor(Field& x, F&& f) {
  using T = std::remove_const_t<Field>;
  if constexpr (std::is_same<T, Tensor>::value) {
    f(x);
  } else if constexpr (std::is_same<T, Projection>::value) {
    visit_projection(x, [&](const char*, auto& t, ProjectionAxis) { for_each_tensor(t, f); });
  } else if constexpr (std::is_same<T, QkNorm>::value) {
    visit_qk_norm(x, [&](auto& field) { for_each_tensor(field, f); });
  } else if constexpr (std::is_same<T, Mla>::value) {
    visit_mla(x, [&](auto& field) { for_each_tensor(field, f); });
  } else if constexpr (is_optional<T>::value) {
    if (x) for_each_tensor(*x, f);
  }
}

// Every tensor of the spec that holds float64 as float32, with a fresh uid
// (the narrowed spec is a different spec for plan caches); other tensors
// are shared, not copied.
AttentionSpec spec_as_f32(const AttentionSpec& s);
// True when any tensor of the spec is float64.
bool spec_holds_f64(const AttentionSpec& s);

}  // namespace mha
