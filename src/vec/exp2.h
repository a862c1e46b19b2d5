#pragma once
// 2^x for x <= 0 on any float lane type (lanes_avx2.h, lanes_avx512.h):
// the one copy of the polynomial every cpu kernel's softmax uses, so that
// all instruction sets round alike. The softmax only ever exponentiates
// differences to a running maximum. x = n + f with |f| <= 1/2; 2^f by a
// degree-6 fit (relative error 1.6e-8 in exact arithmetic, so float
// rounding dominates); 2^n built in the exponent field (V::pow2i_rounded). Below
// -127 (and for -inf) the result is 0: n = -127 gives an all-zero pattern.
namespace mha::vec {

template <class V>
[[gnu::always_inline]] inline typename V::F exp2_nonpositive(typename V::F x) {
  using F = typename V::F;
  x = V::max(x, V::set1(-127.0f));
  // Adding 1.5 * 2^23 rounds x to an integer (to nearest, ties to even,
  // as V::round would): t's last bits are n's, so 2^n comes from t without a
  // conversion, and n = t - 1.5 * 2^23 exactly. Two adds instead of a
  // round and a convert on the FMA ports the P.V and score tiles share.
  const F magic = V::set1(12582912.0f);
  const F t = V::add(x, magic);
  const F n = V::sub(t, magic);
  const F f = V::sub(x, n);
  F p = V::set1(1.5337577497120947e-4f);
  p = V::fmadd(p, f, V::set1(1.3399861054494977e-3f));
  p = V::fmadd(p, f, V::set1(9.618519805371761e-3f));
  p = V::fmadd(p, f, V::set1(5.550329014658928e-2f));
  p = V::fmadd(p, f, V::set1(2.4022646248340607e-1f));
  p = V::fmadd(p, f, V::set1(6.931471824645996e-1f));
  p = V::fmadd(p, f, V::set1(1.0f));
  return V::mul(p, V::pow2i_rounded(t));
}

}  // namespace mha::vec
