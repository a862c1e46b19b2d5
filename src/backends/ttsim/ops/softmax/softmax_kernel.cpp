// ttnn.softmax's compute kernel (numeric_stable=false) on the SFPU, matrix
// unit and packer models of src/ttsim. Learned from tt-metal's softmax
// compute kernel; written independently.
#include "backends/ttsim/ops/softmax/softmax_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "ttsim/sfpu.h"

namespace mha::ttsim {

ComputeConfig softmax_default_config() {
  ComputeConfig c;
  c.math_fidelity = MathFidelity::HiFi4;
  c.math_approx_mode = true;
  c.fp32_dest_acc_en = false;
  return c;
}

void tt_softmax(const TileTensor& in, TileTensor& out, const ComputeConfig& cfg, const Exec& ex) {
  const bool fp32 = cfg.fp32_dest_acc_en;
  const DataFormat im = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
  const int phases = fidelity_phase_count(cfg.math_fidelity);
  const ExpAlgorithm algo = exp_algorithm(cfg.math_approx_mode, fp32);
  out = make_tile_tensor(in.shape, cfg.output);
  const int64_t W = in.pcols, Kt = W / kTile, blocks = in.batch * (in.prows / kTile);
  const simd::KernelTable* kern = ex.kernels(cfg.arch);
  // The reduce's scaler: 1.0 in SrcB for every K (Bfloat16 here and below
  // means "no unpack conversion": the values are already what Src holds).
  std::vector<simd::ARec> ones_rec;
  if (kern) {
    std::vector<float> ones(static_cast<size_t>(W), 1.0f);
    ones_rec.resize(static_cast<size_t>(W * phases));
    detail::decode_in0(ones.data(), W, 1, W, DataFormat::Bfloat16, fp32, phases, ones_rec.data());
  }
  const detail::SrcDatum one = detail::encode_srcb(1.0f);
  const detail::SrcDatum ones16[16] = {one, one, one, one, one, one, one, one,
                                       one, one, one, one, one, one, one, one};
  struct Scratch {
    std::vector<float> e, o;
    std::vector<detail::SrcDatum> ea;
    detail::In1Buffer in1;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(blocks, [&](int64_t t, int th) {
    Scratch& s = scratch[static_cast<size_t>(th)];
    s.e.resize(static_cast<size_t>(kTile * W));
    s.o.resize(static_cast<size_t>(W));
    const int64_t b = t / (in.prows / kTile), r0 = (t % (in.prows / kTile)) * kTile;
    // exp of every value (padded columns get -inf added first, so give 0),
    // packed to the intermediate format.
    for (int64_t r = 0; r < kTile; ++r) {
      float* e = &s.e[r * W];
      for (int64_t c = 0; c < W; ++c)
        e[c] = c < in.cols ? unpack_to_src(in.matrix(b)[(r0 + r) * W + c], in.format, fp32) : -std::numeric_limits<float>::infinity();
      if (kern && algo == ExpAlgorithm::FastApprox) {
        kern->exp_fast_approx(e, W, fp32, e);
      } else {
        for (int64_t c = 0; c < W; ++c) e[c] = sfpu_exp(e[c], cfg.math_approx_mode, fp32, cfg.arch);
      }
      pack_from_dst(e, e, W, im, fp32, cfg.bfp8_pack_precise);
    }
    // Row sums: the reduce runs on the matrix unit, data in SrcA and the
    // scaler in SrcB, tile by tile, phases outer, faces inner.
    uint32_t sums[kTile] = {};
    if (kern) {
      s.in1.resize(W, kTile);
      detail::decode_in1(s.e.data(), 1, W, W, kTile, DataFormat::Bfloat16, fp32, s.in1, 0);
      kern->mvmul(ones_rec.data(), 0, 1, s.in1.view(), kTile, Kt, phases, fp32, sums, kTile);
    } else {
      s.ea.resize(static_cast<size_t>(W));
      for (int64_t r = 0; r < kTile; ++r) {
        for (int64_t c = 0; c < W; ++c) s.ea[c] = detail::encode_srca(s.e[r * W + c]);
        uint32_t acc = 0;
        for (int64_t kt = 0; kt < W; kt += kTile)
          for (int p = 0; p < phases; ++p)
            for (int64_t kf = kt; kf < kt + kTile; kf += kFace) acc = detail::dot16(ones16, &s.ea[kf], acc, p, fp32, cfg.arch);
        sums[r] = acc;
      }
    }
    for (int64_t r = 0; r < kTile; ++r) {
      const float sum = f32_from_bits(sums[r]);
      // recip_tile: the 1/ln2-seeded reciprocal until mid-2025 (the one seed
      // 000's hardware run matched), the quadratic one since.
      const bool legacy = cfg.tt_metal == TtMetal::R2024;
      float recip = legacy ? sfpu_reciprocal_legacy(sum, cfg.math_approx_mode, fp32, cfg.arch)
                           : sfpu_reciprocal(sum, cfg.math_approx_mode, fp32, cfg.arch);
      pack_from_dst(&recip, &recip, 1, im, fp32, cfg.bfp8_pack_precise);
      const float* e = &s.e[r * W];
      if (kern) {
        kern->elwmul(e, &recip, 0, W, phases, fp32, s.o.data());
      } else {
        for (int64_t c = 0; c < W; ++c) s.o[c] = fpu_mul(e[c], recip, cfg.math_fidelity, fp32, cfg.arch);
      }
      pack_from_dst(s.o.data(), out.matrix(b) + (r0 + r) * W, W, cfg.output, fp32, cfg.bfp8_pack_precise);
    }
  });
}

}  // namespace mha::ttsim
