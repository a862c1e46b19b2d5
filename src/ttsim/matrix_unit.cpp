#include "ttsim/matrix_unit.h"

#include <vector>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "util/error.h"

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
  throw InputError("unknown math_fidelity '" + name + "': expected LoFi, HiFi2, HiFi3 or HiFi4");
}

const char* numerics_name(Numerics) { return "exact"; }

Numerics numerics_from_name(const std::string& name) {
  if (name == "exact") return Numerics::Exact;
  if (name == "fast")
    throw InputError("numerics 'fast' was removed: exact numerics now run within 3x of its speed (docs/TTSIM.md); "
                     "use \"exact\" or leave numerics out");
  throw InputError("unknown numerics '" + name + "': expected exact");
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

// Dst values for rows [r0, r1) of one batch, exact numerics, scalar lane
// model (the oracle): per output element, per K tile, phases outer and the
// two 16-wide K faces inner, as the LLK's MOP runs them.
void matmul_oracle_rows(const float* a, const float* b, float* dst, int64_t r0, int64_t r1, int64_t K, int64_t N,
                        DataFormat fa, DataFormat fb, const ComputeConfig& cfg) {
  const bool fp32 = cfg.fp32_dest_acc_en;
  const int64_t M = r1 - r0;
  std::vector<detail::SrcDatum> ea(static_cast<size_t>(M * K)), eb(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < M * K; ++i) ea[i] = detail::encode_srcb(unpack_to_src(a[r0 * K + i], fa, fp32));
  for (int64_t k = 0; k < K; ++k)  // B transposed so a column is contiguous along K
    for (int64_t n = 0; n < N; ++n) eb[n * K + k] = detail::encode_srca(unpack_to_src(b[k * N + n], fb, fp32));
  const int phases = fidelity_phase_count(cfg.math_fidelity);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t acc = 0;
      for (int64_t kt = 0; kt < K; kt += kTile)
        for (int p = 0; p < phases; ++p)
          for (int64_t kf = kt; kf < kt + kTile; kf += kFace)
            acc = detail::dot16(&ea[m * K + kf], &eb[n * K + kf], acc, p, fp32);
      dst[(r0 + m) * N + n] = f32_from_bits(acc);
    }
}

// Exact numerics on the vector kernels: in1 decoded once per matrix, then
// one task per 32-row block of in0 (decoded by the task), each writing only
// its own output rows.
void matmul_vector(const TileTensor& a, const TileTensor& b, TileTensor& out, const ComputeConfig& cfg,
                   const Exec& ex) {
  const simd::KernelTable& kern = *ex.kernels();
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
    std::vector<float> dst;
  };
  std::vector<Scratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(a.batch * mblocks, [&](int64_t t, int th) {
    const int64_t bi = t / mblocks, r0 = (t % mblocks) * kTile, bb = b.batch == 1 ? 0 : bi;
    Scratch& s = scratch[static_cast<size_t>(th)];
    s.arec.resize(static_cast<size_t>(kTile * K * P));
    s.dst.assign(static_cast<size_t>(kTile * N), 0.0f);
    detail::decode_in0(a.matrix(bi) + r0 * K, K, kTile, K, a.format, fp32, P, s.arec.data());
    kern.mvmul(s.arec.data(), K * P, kTile, in1.view(bb * K), N, Kt, P, fp32, reinterpret_cast<uint32_t*>(s.dst.data()),
               N);
    for (int64_t r = 0; r < kTile; ++r)
      pack_from_dst(&s.dst[r * N], out.matrix(bi) + (r0 + r) * N, N, cfg.output, fp32, cfg.bfp8_pack_precise);
  });
}

}  // namespace

void tt_matmul(const TileTensor& a, const TileTensor& b, TileTensor& out, const ComputeConfig& cfg,
               const Exec& ex) {
  check_shapes(a, b);
  Shape shape = a.shape;
  if (shape.size() < 2) shape.insert(shape.begin(), 1);
  shape.back() = b.cols;
  out = make_tile_tensor(shape, cfg.output);
  const int64_t M = a.prows, K = a.pcols, N = b.pcols;
  if (ex.kernels()) {
    matmul_vector(a, b, out, cfg, ex);
    return;
  }
  const int64_t mblocks = M / kTile;
  std::vector<float> dst(static_cast<size_t>(a.batch * M * N));
  ex.parallel_for(a.batch * mblocks, [&](int64_t t, int) {
    const int64_t bi = t / mblocks, r0 = (t % mblocks) * kTile;
    matmul_oracle_rows(a.matrix(bi), b.matrix(b.batch == 1 ? 0 : bi), &dst[bi * M * N], r0, r0 + kTile, K, N, a.format,
                       b.format, cfg);
  });
  for (int64_t bi = 0; bi < a.batch; ++bi)
    pack_from_dst(&dst[bi * M * N], out.matrix(bi), M * N, cfg.output, cfg.fp32_dest_acc_en, cfg.bfp8_pack_precise);
}

}  // namespace mha::ttsim
