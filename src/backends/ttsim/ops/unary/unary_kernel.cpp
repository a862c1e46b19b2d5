#include "backends/ttsim/ops/unary/unary_kernel.h"

#include <vector>

#include "ttsim/sfpu.h"

namespace mha::ttsim {

const char* unary_op_name(UnaryOp op) { return op == UnaryOp::Exp ? "exp" : "reciprocal"; }

void tt_unary(const TileTensor& a, UnaryOp op, TileTensor& out, bool approx, bool fp32, bool precise,
              const Exec& ex, Arch arch) {
  const int64_t W = a.pcols;
  // UnpackToDestFp32: only a float32 input into an FP32 Dst skips Src.
  const bool to_dest = a.format == DataFormat::Float32 && fp32;
  // One task per 32-row block of padded rows, each writing only its rows.
  const int64_t rows = a.batch * a.prows, chunk = 32;
  ex.parallel_for((rows + chunk - 1) / chunk, [&](int64_t t, int) {
    std::vector<float> d(static_cast<size_t>(W));
    for (int64_t g = t * chunk; g < rows && g < (t + 1) * chunk; ++g) {
      const int64_t bi = g / a.prows, r = g % a.prows;
      const float* in = a.matrix(bi) + r * W;
      for (int64_t c = 0; c < W; ++c) {
        const float x = to_dest ? in[c] : unpack_to_src(in[c], a.format, fp32);
        d[c] = op == UnaryOp::Exp ? sfpu_exp(x, approx, fp32, arch) : sfpu_reciprocal(x, approx, fp32, arch);
      }
      pack_from_dst(d.data(), out.matrix(bi) + r * W, W, out.format, fp32, precise);
    }
  });
}

}  // namespace mha::ttsim
