#include "ttsim/matrix_unit.h"

#include <algorithm>
#include <vector>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::ttsim {

const char* fidelity_name(MathFidelity f) {
  switch (f) {
    case MathFidelity::LoFi: return "LoFi";
    case MathFidelity::HiFi2: return "HiFi2";
    case MathFidelity::HiFi3: return "HiFi3";
    case MathFidelity::HiFi4: return "HiFi4";
  }
  return "?";
}

MathFidelity fidelity_from_name(const std::string& name) {
  if (name == "LoFi") return MathFidelity::LoFi;
  if (name == "HiFi2") return MathFidelity::HiFi2;
  if (name == "HiFi3") return MathFidelity::HiFi3;
  if (name == "HiFi4") return MathFidelity::HiFi4;
  throw InputError("unknown math_fidelity '" + printable(name) + "': expected LoFi, HiFi2, HiFi3 or HiFi4");
}

const char* numerics_name(Numerics) { return "exact"; }

Numerics numerics_from_name(const std::string& name) {
  if (name == "exact") return Numerics::Exact;
  if (name == "fast")
    throw InputError("numerics 'fast' was removed: exact numerics now run within 3x of its speed (docs/TTSIM.md); "
                     "use \"exact\" or leave numerics out");
  throw InputError("unknown numerics '" + printable(name) + "': expected exact");
}

const std::vector<std::pair<const char*, MathFidelity>>& field_choices(MathFidelity*) {
  static const std::vector<std::pair<const char*, MathFidelity>> c = {{"LoFi", MathFidelity::LoFi},
                                                                        {"HiFi2", MathFidelity::HiFi2},
                                                                        {"HiFi3", MathFidelity::HiFi3},
                                                                        {"HiFi4", MathFidelity::HiFi4}};
  return c;
}

const std::vector<std::pair<const char*, Numerics>>& field_choices(Numerics*) {
  static const std::vector<std::pair<const char*, Numerics>> c = {{"exact", Numerics::Exact}};
  return c;
}

int fidelity_phase_count(MathFidelity f) { return f == MathFidelity::LoFi ? 1 : static_cast<int>(f); }

namespace {

void check_shapes(const TileTensor& a, const TileTensor& b) {
  if (a.cols != b.rows)
    throw InputError("tt-sim matmul: inner dimensions differ: a " + shape_str(a.shape) + " @ b " +
                     shape_str(b.shape));
  if (b.batch != 1 && b.batch != a.batch)
    throw InputError("tt-sim matmul: batch dimensions differ: a " + shape_str(a.shape) + " @ b " +
                     shape_str(b.shape));
}

// One task's output rows through the K blocks of `blk` (kblock.h), in the
// order bmm_large_block_zm_fused_bias_activation runs them, then packed to
// cfg.output into out (n values, whole rows). mm(kt0, kt1, dst) adds the
// MVMULs of K tiles [kt0, kt1) into the Dst values dst[0:n]. kern, when
// given, runs the bf16 L1 accumulation on its vector kernel.
template <class MM>
void run_k_blocks(const MM& mm, int64_t Kt, const MatmulBlocking& blk, const ComputeConfig& cfg, int64_t n,
                  std::vector<float>& dst, std::vector<float>& l1, float* out,
                  const simd::KernelTable* kern = nullptr) {
  const bool fp32 = cfg.fp32_dest_acc_en, precise = cfg.bfp8_pack_precise;
  const int64_t nb = blk.blocks(Kt), w = nb == 1 ? Kt : blk.in0_block_w;
  dst.assign(static_cast<size_t>(n), 0.0f);
  if (nb > 1 && blk.packer_l1_acc) {
    // Blocks start from a zeroed Dst (the packer's release clears it); their
    // packed partials are summed in L1. Without a fused bias the sum is
    // reloaded (exactly; exponent-0 values become +0 on the way to Dst) for
    // the last block, which then packs to the output.
    const int64_t in_l1 = blk.bias_fused ? nb : nb - 1;
    l1.resize(static_cast<size_t>(n));
    const bool f32 = blk.interm == DataFormat::Float32;
    for (int64_t b = 0; b < in_l1; ++b) {
      if (b > 0) std::fill(dst.begin(), dst.end(), 0.0f);
      mm(b * w, std::min((b + 1) * w, Kt), dst.data());
      pack_from_dst(dst.data(), b == 0 ? l1.data() : dst.data(), n, blk.interm, fp32, precise);
      if (b > 0 && !f32 && kern)
        kern->l1_acc_bf16(l1.data(), dst.data(), n);
      else if (b > 0 && f32 && kern)
        l1_acc_fp32(l1.data(), dst.data(), n);
      else if (b > 0)
        for (int64_t i = 0; i < n; ++i) l1[i] = f32 ? l1_acc_fp32(l1[i], dst[i]) : l1_acc_bf16(l1[i], dst[i]);
    }
    if (blk.bias_fused) {  // the caller's output format is the intermediate one
      std::copy_n(l1.data(), n, out);
      return;
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = l1[i] == 0.0f ? 0.0f : l1[i];
    mm((nb - 1) * w, Kt, dst.data());
  } else {
    // Spill and reload: between blocks the partials are packed to the
    // intermediate format and reloaded into Dst (a bf16 or bfp value reloads
    // exactly).
    for (int64_t b = 0; b < nb; ++b) {
      if (b > 0) pack_from_dst(dst.data(), dst.data(), n, blk.interm, fp32, precise);
      mm(b * w, std::min((b + 1) * w, Kt), dst.data());
    }
  }
  pack_from_dst(dst.data(), out, n, cfg.output, fp32, precise);
}

// One 32-row task on the scalar lane model (the oracle): per output
// element, per K tile, phases outer and the two 16-wide K faces inner, as
// the LLK's MOP runs them. a: the task's rows (kTile x K); b: K x N.
void matmul_oracle_task(const float* a, const float* b, float* out, int64_t K, int64_t N, DataFormat fa, DataFormat fb,
                        const ComputeConfig& cfg, const MatmulBlocking& blk) {
  const bool fp32 = cfg.fp32_dest_acc_en;
  std::vector<detail::SrcDatum> ea(static_cast<size_t>(kTile * K)), eb(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < kTile * K; ++i) ea[i] = detail::encode_srcb(unpack_to_src(a[i], fa, fp32));
  for (int64_t k = 0; k < K; ++k)  // B transposed so a column is contiguous along K
    for (int64_t n = 0; n < N; ++n) eb[n * K + k] = detail::encode_srca(unpack_to_src(b[k * N + n], fb, fp32));
  const int phases = fidelity_phase_count(cfg.math_fidelity);
  auto mm = [&](int64_t kt0, int64_t kt1, float* dst) {
    for (int64_t m = 0; m < kTile; ++m)
      for (int64_t n = 0; n < N; ++n) {
        uint32_t acc = f32_bits(dst[m * N + n]);
        for (int64_t kt = kt0 * kTile; kt < kt1 * kTile; kt += kTile)
          for (int p = 0; p < phases; ++p)
            for (int64_t kf = kt; kf < kt + kTile; kf += kFace)
              acc = detail::dot16(&ea[m * K + kf], &eb[n * K + kf], acc, p, fp32, cfg.arch);
        dst[m * N + n] = f32_from_bits(acc);
      }
  };
  std::vector<float> dst, l1;
  run_k_blocks(mm, K / kTile, blk, cfg, kTile * N, dst, l1, out);
}

// Exact numerics on the vector kernels: in1 decoded once per matrix, then
// one task per 32-row block of in0 (decoded by the task), each writing only
// its own output rows.
void matmul_vector(const TileTensor& a, const TileTensor& b, TileTensor& out, const ComputeConfig& cfg,
                   const MatmulBlocking& blk, const Exec& ex) {
  const simd::KernelTable& kern = *ex.kernels(cfg.arch);
  const bool fp32 = cfg.fp32_dest_acc_en;
  const int64_t M = a.prows, K = a.pcols, N = b.pcols, Kt = K / kTile, mblocks = M / kTile;
  const int P = fidelity_phase_count(cfg.math_fidelity);
  detail::In1Buffer in1;
  in1.resize(b.batch * K, N);
  ex.parallel_for(b.batch * Kt, [&](int64_t t, int) {
    const int64_t bi = t / Kt, k0 = (t % Kt) * kTile;
    detail::decode_in1(b.matrix(bi) + k0 * N, N, 1, kTile, N, b.format, fp32, in1, bi * K + k0);
  });
  struct Scratch {
    std::vector<simd::ARec> arec;
    std::vector<float> dst, l1;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(a.batch * mblocks, [&](int64_t t, int th) {
    const int64_t bi = t / mblocks, r0 = (t % mblocks) * kTile, bb = b.batch == 1 ? 0 : bi;
    Scratch& s = scratch[static_cast<size_t>(th)];
    s.arec.resize(static_cast<size_t>(kTile * K * P));
    detail::decode_in0(a.matrix(bi) + r0 * K, K, kTile, K, a.format, fp32, P, s.arec.data());
    const int64_t rows = detail::live_rows(s.arec.data(), kTile, K, P);
    auto mm = [&](int64_t kt0, int64_t kt1, float* dst) {
      kern.mvmul(s.arec.data() + kt0 * P * kTile, K * P, rows, in1.view(bb * K + kt0 * kTile), N, kt1 - kt0, P, fp32,
                 reinterpret_cast<uint32_t*>(dst), N);
    };
    run_k_blocks(mm, Kt, blk, cfg, kTile * N, s.dst, s.l1, out.matrix(bi) + r0 * N, &kern);
  });
}

}  // namespace

void tt_matmul(const TileTensor& a, const TileTensor& b, TileTensor& out, const ComputeConfig& cfg,
               const Exec& ex, const MatmulBlocking& blk) {
  check_shapes(a, b);
  Shape shape = a.shape;
  if (shape.size() < 2) shape.insert(shape.begin(), 1);
  shape.back() = b.cols;
  out = make_tile_tensor(shape, cfg.output);
  if (ex.kernels(cfg.arch)) {
    matmul_vector(a, b, out, cfg, blk, ex);
    return;
  }
  const int64_t M = a.prows, K = a.pcols, N = b.pcols, mblocks = M / kTile;
  ex.parallel_for(a.batch * mblocks, [&](int64_t t, int) {
    const int64_t bi = t / mblocks, r0 = (t % mblocks) * kTile;
    matmul_oracle_task(a.matrix(bi) + r0 * K, b.matrix(b.batch == 1 ? 0 : bi), out.matrix(bi) + r0 * N, K, N, a.format,
                       b.format, cfg, blk);
  });
}

}  // namespace mha::ttsim
