#include "backends/ttsim/ops/sdpa/sdpa_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

namespace {

// SFP_STOCH_RND to a sign-magnitude integer, round to nearest even,
// saturating at +-lim (FP32_TO_INT8: 127; FP32_TO_UINT8: 0..255).
float sfpu_round_int(float x, float lo, float hi) { return std::min(hi, std::max(lo, std::nearbyint(x))); }

// calculate_exponential_polynomial<SCALE_EN, .., no SFPARECIP, degree 4
// with an fp32 Dst (2 otherwise)> (ckernel_sfpu_sdpa.h at 637d956c): x times
// the bf16 scale, k = round(x / ln2) as int8, r = x - k ln2, a polynomial in
// r, times 2^k built from k + 127 as the exponent field; 0 where k + 127 is
// not positive. The value before the store.
float exp_polynomial(float x, float scale_bf16, bool fp32, Arch a) {
  static const float c2p[3] = {0.999848792924395313327307061545061386175496934006f,
                               1.01508760098521056684783640695492761469306929535975f,
                               0.50628367056745568861842335616023694454759126020461f};
  static const float c4p[5] = {1.0000001510806179002040134468008959160576106495165f,
                               0.99996228117047652035114096488703457970402030983204f,
                               0.49998365704615426417337683145647067790385638465486f,
                               0.16792157982882225102649214918047336097544632172075f,
                               4.1959439860014343843000081999668024587178974865521e-2f};
  x = sfpu_mul(x, scale_bf16, a);
  const float k = sfpu_round_int(sfpu_mul(x, 1.44269504088896340736f, a), -127.0f, 127.0f);
  const float r = sfpu_mad(k, -0.69314718055994530942f, x, a);
  float p;
  if (fp32) {
    p = sfpu_mad(r, c4p[4], c4p[3], a);
    for (int i = 2; i >= 0; --i) p = sfpu_mad(r, p, c4p[i], a);
  } else {
    p = sfpu_mad(r, sfpu_mad(r, c2p[2], c2p[1], a), c2p[0], a);
  }
  const float kb = sfpu_add(k, 127.0f, a);  // SFPADDI 0x42fe
  const uint32_t e = static_cast<uint32_t>(sfpu_round_int(kb, 0.0f, 255.0f));
  float y = sfpu_mul(p, f32_from_bits(e << 23), a);  // SFPSETEXP on +0
  if (!(kb > 0.0f)) y = 0.0f;                        // SFPSETCC, SFPLOADI 0
  return fp32 ? y : sfpu_round_bf16(y);  // SFP_STOCH_RND to FP16B before the 16-bit store
}

// Sizes a work buffer to at least n, never shrinking it: the matrix-unit
// steps alternate between small and large record counts, and a shrink then
// grow value-initialises the whole tail again.
template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

}  // namespace

float sdpa_truncate_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0xffff0000u;
  float t;
  std::memcpy(&t, &u, 4);
  return t;
}

float sdpa_exp_first_column(float d, float scale_bf16, bool exp_approx_mode, bool fp32, Arch arch) {
  if (!exp_approx_mode) return exp_polynomial(d, scale_bf16, fp32, arch);
  return sfpu_store(sdpa_exp_accurate_scaled(d, scale_bf16, fp32, arch), fp32);
}

float sdpa_exp_accurate_scaled(float d, float scale_bf16, bool fp32, Arch arch) {
  return sfpu_exp_lane(sfpu_mul(d, scale_bf16, arch), fp32 ? ExpAlgorithm::AccurateFp32 : ExpAlgorithm::Accurate21f,
                       arch);
}

TileMath::TileMath(MathFidelity f, bool fp32_dest, bool math_approx, const simd::KernelTable* k, Arch a)
    : fidelity(f), phases(fidelity_phase_count(f)), fp32(fp32_dest), approx(math_approx), kern(k), arch(a) {}

void sdpa_pack_bf16(float* x, int64_t n, const TileMath& m) {
  // A 16-bit Dst holds bf16 values already, but the packer still turns NaN
  // into Inf and flushes denormals (an SFPU store can leave one: the fast
  // approx exp of a very negative input) to +0.
  pack_from_dst(x, x, n, DataFormat::Bfloat16, m.fp32, false);
}

namespace {

// sdpa_pack_bf16 of matrix-unit (FPU) results. With a 16-bit Dst on the
// vector kernels the packer's stage is skipped: it changes no such value.
// The Dst adder rounds to bf16, overflows to a signed Inf (never NaN) and
// gives +0 below the normal range (the kernels flush), so there is no NaN to
// turn into Inf, no exponent-0 value to flush and nothing below bf16 to cut.
// The lane models (the oracle's path) still pack, and the tests compare the
// two; an SFPU result (exp) always packs.
void pack_fpu_result(float* x, int64_t n, const TileMath& m) {
  if (m.kern && !m.fp32) return;
  sdpa_pack_bf16(x, n, m);
}

}  // namespace

void sdpa_mul_bcast(float* x, int64_t n, float s, const TileMath& m) {
  if (m.kern) {
    m.kern->elwmul(x, &s, 0, n, m.phases, m.fp32, x);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = fpu_mul(x[i], s, m.fidelity, m.fp32, m.arch);
  }
  pack_fpu_result(x, n, m);
}

void sdpa_add(float* a, const float* b, int64_t n, const TileMath& m) {
  if (m.kern) {
    m.kern->elwadd(a, b, 1, n, m.fp32, a);
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] = fpu_add(a[i], b[i], m.fp32, m.arch);
  }
  pack_fpu_result(a, n, m);
}

float sdpa_row_max(const float* x, int64_t n) { return simd::host_kernels().row_max(x, n); }

void sdpa_sub_exp(float* x, int64_t n, float mx, bool approx_exp, const TileMath& tm) {
  // ELWSUB is ELWADD of the negated operand (sign-magnitude: exact).
  const float neg = -mx;
  if (tm.kern) {
    tm.kern->elwadd(x, &neg, 0, n, tm.fp32, x);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = fpu_add(x[i], neg, tm.fp32, tm.arch);
  }
  if (tm.kern && exp_algorithm(approx_exp, tm.fp32) == ExpAlgorithm::FastApprox) {
    tm.kern->exp_fast_approx(x, n, tm.fp32, x);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = sfpu_exp(x[i], approx_exp, tm.fp32, tm.arch);
  }
  sdpa_pack_bf16(x, n, tm);
}

float sdpa_sub_exp1(float a, float b, bool approx_exp, const TileMath& m) {
  float x = sfpu_exp(fpu_add(a, -b, m.fp32, m.arch), approx_exp, m.fp32, m.arch);
  sdpa_pack_bf16(&x, 1, m);
  return x;
}

float sdpa_mul1(float a, float b, const TileMath& m) {
  float x;
  if (m.kern) {  // one vector of lanes (the others zero): cheaper than the lane model's 16-term dot
    float av[16] = {a}, out[16];
    m.kern->elwmul(av, &b, 0, m.kern->lanes, m.phases, m.fp32, out);
    x = out[0];
  } else {
    x = fpu_mul(a, b, m.fidelity, m.fp32, m.arch);
  }
  sdpa_pack_bf16(&x, 1, m);
  return x;
}

float sdpa_add1(float a, float b, const TileMath& m) {
  float x = fpu_add(a, b, m.fp32, m.arch);
  sdpa_pack_bf16(&x, 1, m);
  return x;
}

float sdpa_recip1(float x, const TileMath& m) {
  float r = sfpu_reciprocal_legacy(x, m.approx, m.fp32, m.arch);
  sdpa_pack_bf16(&r, 1, m);
  return r;
}

void sdpa_row_sums(const float* x, int64_t ld, int64_t rows, int64_t n, const TileMath& m, SdpaScratch& s,
                   float* sums) {
  if (m.kern) {
    // Lanes across rows: the rows are in1 (SrcA, K = n), the scaler in0.
    grow(s.arec, n * m.phases);
    s.t.assign(static_cast<size_t>(n), 1.0f);
    detail::decode_in0(s.t.data(), n, 1, n, DataFormat::Bfloat16, m.fp32, m.phases, s.arec.data());
    const int64_t N = pad_to_tile(rows);
    s.in1.resize(n, N);
    if (rows == N) {  // no padding columns: decode the rows in place, read transposed
      detail::decode_in1(x, 1, ld, n, N, DataFormat::Bfloat16, m.fp32, s.in1, 0);
    } else {
      s.t.assign(static_cast<size_t>(n * N), 0.0f);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < n; ++k) s.t[k * N + r] = x[r * ld + k];
      detail::decode_in1(s.t.data(), N, 1, n, N, DataFormat::Bfloat16, m.fp32, s.in1, 0);
    }
    s.dst.assign(static_cast<size_t>(N), 0u);
    m.kern->mvmul(s.arec.data(), 0, 1, s.in1.view(), N, n / kTile, m.phases, m.fp32, s.dst.data(), N);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&sums[r], &s.dst[r], 4);
  } else {
    const detail::SrcDatum one = detail::encode_srcb(1.0f);
    detail::SrcDatum ones[16], ea[16];
    std::fill(ones, ones + 16, one);
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t acc = 0;
      for (int64_t kt = 0; kt < n; kt += kTile)
        for (int p = 0; p < m.phases; ++p)
          for (int64_t kf = kt; kf < kt + kTile; kf += kFace) {
            for (int i = 0; i < 16; ++i) ea[i] = detail::encode_srca(x[r * ld + kf + i]);
            acc = detail::dot16(ones, ea, acc, p, m.fp32, m.arch);
          }
      std::memcpy(&sums[r], &acc, 4);
    }
  }
  sdpa_pack_bf16(sums, rows, m);
}

void sdpa_matmul(const float* a, int64_t lda, int64_t rows, int64_t K, const float* b, int64_t ks, int64_t ns,
                 int64_t N, const TileMath& m, SdpaScratch& s, float* out, int64_t ldo) {
  if (m.kern) {
    s.in1.resize(K, N);
    detail::decode_in1(b, ks, ns, K, N, DataFormat::Bfloat16, m.fp32, s.in1, 0);
    sdpa_matmul_decoded(a, lda, rows, K, s.in1, 0, 0, N, m, s, out, ldo);
    return;
  }
  sdpa_matmul_lanes(a, lda, rows, K, false, b, ks, ns, N, m, out, ldo);
  for (int64_t r = 0; r < rows; ++r) sdpa_pack_bf16(out + r * ldo, N, m);
}

void sdpa_matmul_lanes(const float* a, int64_t lda, int64_t rows, int64_t K, bool a_f32, const float* b, int64_t ks,
                       int64_t ns, int64_t N, const TileMath& m, float* out, int64_t ldo) {
  // fpu_dot16 per face, with each operand encoded once rather than once per
  // face it meets (N times for an a element, rows times for a b one): the
  // same Src values, so the same bits. Src keeps TF32 (a_f32) or bf16 bits.
  const uint32_t keep = a_f32 ? 0xffffe000u : 0xffff0000u;
  auto src = [keep](float x) { return f32_from_bits(f32_bits(x) & keep); };
  std::vector<detail::SrcDatum> ea(static_cast<size_t>(K)), eb(static_cast<size_t>(N * K));
  for (int64_t c = 0; c < N; ++c)
    for (int64_t k = 0; k < K; ++k) eb[c * K + k] = detail::encode_srca(src(b[k * ks + c * ns]));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const float x = a[r * lda + k];
      ea[k] = detail::encode_srcb(src(a_f32 ? unpack_to_src(x, DataFormat::Float32, true) : x));
    }
    for (int64_t c = 0; c < N; ++c) {
      uint32_t dst = 0;
      for (int64_t kt = 0; kt < K; kt += kTile)
        for (int p = 0; p < m.phases; ++p)
          for (int64_t kf = kt; kf < kt + kTile; kf += kFace)
            dst = detail::dot16(&ea[kf], &eb[c * K + kf], dst, p, m.fp32, m.arch);
      std::memcpy(&out[r * ldo + c], &dst, 4);
    }
  }
}

void sdpa_matmul_decoded(const float* a, int64_t lda, int64_t rows, int64_t K, const detail::In1Buffer& b1,
                         int64_t k0, int64_t c0, int64_t N, const TileMath& m, SdpaScratch& s, float* out,
                         int64_t ldo) {
  grow(s.arec, rows * K * m.phases);
  detail::decode_in0(a, lda, rows, K, DataFormat::Bfloat16, m.fp32, m.phases, s.arec.data());
  sdpa_mvmul(s.arec.data(), rows, K, b1.view(k0, c0), N, m, out, ldo);
  for (int64_t r = 0; r < rows; ++r) pack_fpu_result(out + r * ldo, N, m);
}

void sdpa_mvmul(const simd::ARec* arec, int64_t rows, int64_t K, const simd::In1& b1, int64_t N, const TileMath& m,
                float* out, int64_t ldo) {
  // Dst is the output rows themselves (in0 is decoded by now).
  for (int64_t r = 0; r < rows; ++r) std::fill(out + r * ldo, out + r * ldo + N, 0.0f);
  m.kern->mvmul(arec, K * m.phases, rows, b1, N, K / kTile, m.phases, m.fp32, reinterpret_cast<uint32_t*>(out), ldo);
}

void sdpa_decode_kv(const TileTensor& k, const TileTensor& v, bool fp32, int64_t keys, const Exec& ex,
                    std::vector<detail::In1Buffer>& kt, std::vector<detail::In1Buffer>& vd) {
  const int64_t D = k.pcols, DV = v.pcols, Sk = k.rows, heads = k.shape[0] * k.shape[1];
  kt.resize(static_cast<size_t>(heads));
  vd.resize(kt.size());
  ex.parallel_for(2 * heads, [&](int64_t t, int) {
    const size_t h = static_cast<size_t>(t / 2);
    if (t % 2 == 0) {
      kt[h].resize(D * (Sk / keys), keys);
      for (int64_t j = 0; j < Sk / keys; ++j)
        detail::decode_in1(k.matrix(t / 2) + j * keys * D, 1, D, D, keys, k.format, fp32, kt[h], j * D);
    } else {
      vd[h].resize(Sk, DV);
      detail::decode_in1(v.matrix(t / 2), DV, 1, Sk, DV, v.format, fp32, vd[h], 0);
    }
  });
}

}  // namespace mha::ttsim
