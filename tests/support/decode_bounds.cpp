#include "support/decode_bounds.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "backends/cpu/kv_format.h"

namespace mha::test {

std::vector<std::vector<double>> rounding_bounds(const AttentionSpec& s, const AttentionResult& r, CacheDtype dt,
                                                 const std::vector<double>& uq) {
  const double u = kv_error_unit(dt);
  auto stage = [&](const char* name) -> const Tensor& {
    for (const auto& [n, t] : r.stages)
      if (n == name) return t;
    throw std::logic_error(std::string("no stage ") + name);
  };
  const int64_t blk = cache_dtype_block(dt), dh = s.head_dim, dv = s.head_dim_v, nb = dh / blk;
  const int64_t H = s.num_heads, Hkv = s.num_kv_heads, group = H / Hkv;
  const int64_t B = stage("q").dim(0), L = stage("q").dim(2), St = stage("k").dim(2);
  const std::vector<double> q = stage("q").to_f64(), k = stage("k").to_f64(), v = stage("v").to_f64();
  const std::vector<double> p = stage("weights").to_f64(), ctx = stage("context").to_f64();
  // |x_b|_1 and max|x_b| of every block x_b (blk consecutive elements of a row).
  auto block_stats = [&](const std::vector<double>& x, std::vector<double>& l1, std::vector<double>& mx) {
    l1.assign(x.size() / blk, 0.0), mx.assign(x.size() / blk, 0.0);
    for (std::size_t e = 0; e < x.size(); ++e) {
      l1[e / blk] += std::fabs(x[e]);
      mx[e / blk] = std::max(mx[e / blk], std::fabs(x[e]));
    }
  };
  std::vector<double> q1, qm, k1, km, v1, vm;
  block_stats(q, q1, qm), block_stats(k, k1, km), block_stats(v, v1, vm);
  const std::size_t nu = uq.size();
  std::vector<std::vector<double>> cb(nu, std::vector<double>(B * L * H * dv, 0.0));
  std::vector<double> g(St * nu), ez(nu), zsum(nu);
  const double *q1p = q1.data(), *qmp = qm.data(), *k1p = k1.data(), *kmp = km.data(), *vmp = vm.data();
  const double* uqp = uq.data();
  double *gp = g.data(), *ezp = ez.data(), *zp = zsum.data();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t qr = ((b * H + h) * L + i), kv0 = (b * Hkv + h / group) * St;
        const double* pi = p.data() + qr * St;
        const double *q1r = q1p + qr * nb, *qmr = qmp + qr * nb;
        double psum = 0;
        std::fill(zsum.begin(), zsum.end(), 0.0);
        for (int64_t j = 0; j < St; ++j) {
          if (pi[j] == 0) continue;
          const double *kmj = kmp + (kv0 + j) * nb, *k1j = k1p + (kv0 + j) * nb;
          double dk = 0, dq = 0;
          for (int64_t c = 0; c < nb; ++c) {
            dk += u * q1r[c] * kmj[c];
            dq += (1 + u) * qmr[c] * k1j[c];
          }
          for (std::size_t n = 0; n < nu; ++n) {
            gp[j * nu + n] = std::exp(s.scale * (dk + uqp[n] * dq));
            zp[n] += pi[j] * gp[j * nu + n];
          }
          psum += pi[j];
        }
        for (std::size_t n = 0; n < nu; ++n) ezp[n] = zp[n] + (1 - psum);  // e^z: a sink's share does not move
        const double* vh = v.data() + kv0 * dv;
        const int64_t o = (b * L + i) * H * dv + h * dv;
        const double* co = ctx.data() + o;
        for (std::size_t n = 0; n < nu; ++n) {
          double* cbo = cb[n].data() + o;
          for (int64_t e = 0; e < dv; ++e) cbo[e] = s.sinks ? (1 - psum) * (ezp[n] - 1) * std::fabs(co[e]) : 0.0;
        }
        for (int64_t j = 0; j < St; ++j) {
          if (pi[j] == 0) continue;
          const double *vmj = vmp + (kv0 + j) * (dv / blk), *vhj = vh + j * dv;
          for (std::size_t n = 0; n < nu; ++n) {
            const double gj = gp[j * nu + n] * ezp[n];
            double* cbo = cb[n].data() + o;
            for (int64_t e = 0; e < dv; ++e) {
              const double vu = u * vmj[e / blk], dev = std::fabs(vhj[e] - co[e]);
              cbo[e] += pi[j] * (gj * vu + (gj - 1) * dev);
            }
          }
        }
      }
  if (!s.out) return cb;
  const std::vector<double> w = s.out->weight.to_f64();
  const int64_t O = s.out->weight.dim(0), I = H * dv;
  std::vector<std::vector<double>> ob(nu, std::vector<double>(B * L * O, 0.0));
  for (std::size_t n = 0; n < nu; ++n)
    for (int64_t row = 0; row < B * L; ++row)
      for (int64_t o = 0; o < O; ++o) {
        const double *wo = w.data() + o * I, *cr = cb[n].data() + row * I;
        double& acc = ob[n][row * O + o];
        for (int64_t e = 0; e < I; ++e) acc += std::fabs(wo[e]) * cr[e];
      }
  return ob;
}

::testing::AssertionResult within_bound(const Tensor& a, const Tensor& b, const std::vector<double>& bound) {
  const std::vector<double> x = a.to_f64(), y = b.to_f64();
  if (x.size() != y.size() || x.size() != bound.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= bound[i] + 1e-5 + 1.3e-6 * std::fabs(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i] << ", bound "
                                           << bound[i];
  return ::testing::AssertionSuccess();
}

}  // namespace mha::test
