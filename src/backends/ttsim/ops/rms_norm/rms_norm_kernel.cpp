// ttnn.rms_norm's compute kernel on the FPU, SFPU and packer models of
// src/ttsim. Learned from tt-metal's layernorm.cpp (RMS path); written
// independently.
#include "backends/ttsim/ops/rms_norm/rms_norm_kernel.h"

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_sqrt.h"

namespace mha::ttsim {

namespace {

// The bfloat16 the host puts in a scalar tile: the float's top 16 bits.
float truncate_bf16(float v) { return f32_from_bits(f32_bits(v) & 0xffff0000u); }

// ELWMUL of one pair of Src values (a in SrcA, b in SrcB) over `phases`
// into a zeroed Dst. A Float32 CB reaches Src as TF32 with an fp32 Dst
// (docs/TTSIM.md, "float32 inputs to the FPU"), so its operands keep 10
// mantissa bits here; fpu_mul and the vector elwmul read Src as bfloat16,
// which is exact only for bfloat16 / block-float operands (tt_rms_norm
// uses them there).
float elw_mul(float a, float b, int phases, bool fp32, Arch arch) {
  detail::SrcDatum A[16], B[16];
  for (int i = 1; i < 16; ++i) A[i] = B[i] = detail::encode_srca(0.0f);
  A[0] = detail::encode_srca(a);
  B[0] = detail::encode_srcb(b);
  uint32_t d = 0;
  for (int p = 0; p < phases; ++p) d = detail::dot16(B, A, d, p, fp32, arch);
  return f32_from_bits(d);
}

// The same multiply with its one non-zero lane worked out (the fast path):
// the phase's piece product is the group's only term (no alignment), the
// other group is empty, so accumulate sees that term and Dst alone.
float elw_mul_term(float a, float b, int phases, bool fp32, Arch arch) {
  const detail::SrcDatum A = detail::encode_srca(a), B = detail::encode_srcb(b);
  uint32_t d = 0;
  for (int p = 0; p < phases; ++p) {
    detail::Term t;
    const int32_t e = A.exp + B.exp - 127 - ((p & 1) ? 5 : 0) - ((p & 2) ? 7 : 0);
    if (!A.zero && !B.zero && e > 0) {
      const uint32_t man = static_cast<uint32_t>(A.piece[p & 1]) * B.piece[(p >> 1) & 1];
      t.sign = man != 0 ? (A.sign ^ B.sign) : 0u;
      t.man = int64_t(man) << 13;
      t.exp = e;
    }
    d = detail::accumulate(t, detail::Term{}, d, fp32, arch);
  }
  return f32_from_bits(d);
}

struct RmsRun {
  const ComputeConfig& cfg;
  DataFormat im;  // the intermediate CBs' format
  int phases;
  float scaler, eps;  // bf16 values
  const simd::KernelTable* kern;
  std::vector<simd::ARec> scaler_rec;  // the scaler row as in0 records (vector path)
  // The vector elwmul (bfloat16 Src) for x * x (x not a TF32 Float32) and
  // for the two multiplies of im values (im bfloat16).
  bool vec_square, vec_scale;
};

// out[i] = ELWMUL(a[i], b[i * bstep]), n values: the vector elwmul where
// its bfloat16 Src is exact (`vec`), else elw_mul_term on the fast path and
// elw_mul, the 16-lane model, on the oracle's.
void mul_row(const RmsRun& k, const float* a, const float* b, int64_t bstep, int64_t n, bool vec, float* out) {
  const bool fp32 = k.cfg.fp32_dest_acc_en;
  if (vec) {
    k.kern->elwmul(a, b, bstep, n, k.phases, fp32, out);
  } else if (k.kern) {
    for (int64_t i = 0; i < n; ++i) out[i] = elw_mul_term(a[i], b[i * bstep], k.phases, fp32, k.cfg.arch);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = elw_mul(a[i], b[i * bstep], k.phases, fp32, k.cfg.arch);
  }
}

struct Scratch {
  std::vector<float> xs, x2, y;
  std::vector<detail::SrcDatum> ea;
  detail::In1Buffer in1;
};

// Rows [r0, r0 + 32) of matrix b: x2, then the row sums as the reduce
// leaves them in Dst (FP32 bits).
void sum_squares(const RmsRun& k, const TileTensor& x, int64_t b, int64_t r0, Scratch& s, uint32_t* sums) {
  const ComputeConfig& c = k.cfg;
  const bool fp32 = c.fp32_dest_acc_en;
  const int64_t W = x.pcols;
  for (int64_t r = 0; r < kTile; ++r) {
    float* xs = &s.xs[r * W];
    float* x2 = &s.x2[r * W];
    for (int64_t i = 0; i < W; ++i) xs[i] = unpack_to_src(x.matrix(b)[(r0 + r) * W + i], x.format, fp32);
    mul_row(k, xs, xs, 1, W, k.vec_square, x2);
    pack_from_dst(x2, x2, W, k.im, fp32, c.bfp8_pack_precise);
    for (int64_t i = 0; i < W; ++i) x2[i] = unpack_to_src(x2[i], k.im, fp32);
  }
  if (k.kern) {
    s.in1.resize(W, kTile);
    detail::decode_in1(s.x2.data(), 1, W, W, kTile, DataFormat::Bfloat16, fp32, s.in1, 0);
    k.kern->mvmul(k.scaler_rec.data(), 0, 1, s.in1.view(), kTile, W / kTile, k.phases, fp32, sums, kTile);
    return;
  }
  // reduce_tile per tile into the same Dst: phases outer, faces inner.
  const detail::SrcDatum sc = detail::encode_srcb(k.scaler);
  const detail::SrcDatum sc16[16] = {sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc, sc};
  s.ea.resize(static_cast<size_t>(W));
  for (int64_t r = 0; r < kTile; ++r) {
    for (int64_t i = 0; i < W; ++i) s.ea[i] = detail::encode_srca(s.x2[r * W + i]);
    uint32_t acc = 0;
    for (int64_t kt = 0; kt < W; kt += kTile)
      for (int p = 0; p < k.phases; ++p)
        for (int64_t kf = kt; kf < kt + kTile; kf += kFace) acc = detail::dot16(sc16, &s.ea[kf], acc, p, fp32, c.arch);
    sums[r] = acc;
  }
}

// 1 / sqrt(E[x^2] + eps) for one row, packed to the intermediate CB.
float inverse_rms(const RmsRun& k, uint32_t sum_bits) {
  const ComputeConfig& c = k.cfg;
  const bool fp32 = c.fp32_dest_acc_en;
  float ex2 = f32_from_bits(sum_bits);
  pack_from_dst(&ex2, &ex2, 1, k.im, fp32, c.bfp8_pack_precise);
  const float v = fpu_add(unpack_to_src(ex2, k.im, fp32), k.eps, fp32, c.arch);
  const float root = sfpu_store(sfpu_sqrt_lane(v, c.math_approx_mode, c.arch), fp32);
  float r = sfpu_reciprocal(root, c.math_approx_mode, fp32, c.arch);
  pack_from_dst(&r, &r, 1, k.im, fp32, c.bfp8_pack_precise);
  return unpack_to_src(r, k.im, fp32);
}

// y = x * r (bcast cols), then * gamma (bcast rows), into row `row` of out.
void scale_row(const RmsRun& k, const float* xs, float r, const std::vector<float>& gamma, Scratch& s, float* out,
               int64_t W) {
  const ComputeConfig& c = k.cfg;
  const bool fp32 = c.fp32_dest_acc_en;
  float* y = s.y.data();
  mul_row(k, xs, &r, 0, W, k.vec_scale, y);
  if (gamma.empty()) {
    pack_from_dst(y, out, W, c.output, fp32, c.bfp8_pack_precise);
    return;
  }
  pack_from_dst(y, y, W, k.im, fp32, c.bfp8_pack_precise);
  for (int64_t i = 0; i < W; ++i) y[i] = unpack_to_src(y[i], k.im, fp32);
  mul_row(k, y, gamma.data(), 1, W, k.vec_scale, y);
  pack_from_dst(y, out, W, c.output, fp32, c.bfp8_pack_precise);
}

}  // namespace

void tt_rms_norm(const TileTensor& x, const std::vector<float>& gamma, float epsilon, TileTensor& out,
                 const ComputeConfig& cfg, const Exec& ex) {
  const int64_t W = x.pcols, blocks = x.batch * (x.prows / kTile);
  const bool fp32 = cfg.fp32_dest_acc_en;
  RmsRun k{cfg, fp32 ? DataFormat::Float32 : DataFormat::Bfloat16, fidelity_phase_count(cfg.math_fidelity),
           truncate_bf16(1.0f / static_cast<float>(W)), truncate_bf16(epsilon), ex.kernels(cfg.arch), {}, false, false};
  k.vec_square = k.kern && !(fp32 && x.format == DataFormat::Float32);
  k.vec_scale = k.kern && !fp32;
  if (k.kern) {
    const std::vector<float> scalers(static_cast<size_t>(W), k.scaler);
    k.scaler_rec.resize(static_cast<size_t>(W * k.phases));
    detail::decode_in0(scalers.data(), W, 1, W, DataFormat::Bfloat16, fp32, k.phases, k.scaler_rec.data());
  }
  out = make_tile_tensor(x.shape, cfg.output);
  std::vector<Scratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(blocks, [&](int64_t t, int th) {
    Scratch& s = scratch[static_cast<size_t>(th)];
    s.xs.resize(static_cast<size_t>(kTile * W));
    s.x2.resize(s.xs.size());
    s.y.resize(static_cast<size_t>(W));
    const int64_t b = t / (x.prows / kTile), r0 = (t % (x.prows / kTile)) * kTile;
    uint32_t sums[kTile] = {};  // the reduce accumulates into a cleared Dst
    sum_squares(k, x, b, r0, s, sums);
    for (int64_t r = 0; r < kTile; ++r)
      scale_row(k, &s.xs[r * W], inverse_rms(k, sums[r]), gamma, s, out.matrix(b) + (r0 + r) * W, W);
  });
}

}  // namespace mha::ttsim
