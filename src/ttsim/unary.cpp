#include "ttsim/unary.h"

#include <vector>

#include "ttsim/sfpu.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// Index of b's matrix for a's matrix bi: leading dims right-aligned, b's
// size-1 dims broadcast (as tt_add).
int64_t broadcast_matrix(const TileTensor& a, const TileTensor& b, int64_t bi) {
  const int na = static_cast<int>(a.shape.size()) - 2, nb = static_cast<int>(b.shape.size()) - 2;
  int64_t rem = bi, bidx = 0, bstride = 1;
  for (int d = na - 1; d >= 0; --d) {
    const int64_t idx = rem % a.shape[d];
    rem /= a.shape[d];
    const int db = d - (na - nb);
    if (db >= 0) {
      if (b.shape[db] != 1) bidx += idx * bstride;
      bstride *= b.shape[db];
    }
  }
  return bidx;
}

bool broadcasts_onto(const TileTensor& a, const TileTensor& b) {
  if (b.cols != a.cols || (b.rows != 1 && b.rows != a.rows)) return false;
  const int na = static_cast<int>(a.shape.size()) - 2, nb = static_cast<int>(b.shape.size()) - 2;
  if (nb > na && nb > 0) return false;
  for (int d = 0; d < nb; ++d)
    if (b.shape[d] != 1 && b.shape[d] != a.shape[d + na - nb]) return false;
  return true;
}

// fn(matrix, row, scratch) for every padded row of a, on the pool.
template <class Fn>
void for_rows(const TileTensor& a, const Exec& ex, int64_t scratch_rows, Fn fn) {
  const int64_t rows = a.batch * a.prows, chunk = 32;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for((rows + chunk - 1) / chunk, [&](int64_t t, int th) {
    std::vector<float>& s = scratch[static_cast<size_t>(th)];
    s.resize(static_cast<size_t>(scratch_rows * a.pcols));
    for (int64_t g = t * chunk; g < rows && g < (t + 1) * chunk; ++g) fn(g / a.prows, g % a.prows, s.data());
  });
}

}  // namespace

const char* unary_op_name(UnaryOp op) { return op == UnaryOp::Exp ? "exp" : "reciprocal"; }

void tt_unary(const TileTensor& a, UnaryOp op, TileTensor& out, bool approx, bool fp32, bool precise,
              const Exec& ex) {
  const int64_t W = a.pcols;
  // UnpackToDestFp32: only a float32 input into an FP32 Dst skips Src.
  const bool to_dest = a.format == DataFormat::Float32 && fp32;
  for_rows(a, ex, 1, [&](int64_t bi, int64_t r, float* d) {
    const float* in = a.matrix(bi) + r * W;
    for (int64_t c = 0; c < W; ++c) {
      const float x = to_dest ? in[c] : unpack_to_src(in[c], a.format, fp32);
      d[c] = op == UnaryOp::Exp ? sfpu_exp(x, approx, fp32) : sfpu_reciprocal(x, approx, fp32);
    }
    pack_from_dst(d, out.matrix(bi) + r * W, W, out.format, fp32, precise);
  });
}

void tt_mul(const TileTensor& a, const TileTensor& b, TileTensor& out, MathFidelity fidelity, bool fp32,
            bool precise, const Exec& ex) {
  if (!broadcasts_onto(a, b))
    throw InputError("tt-sim: multiply: cannot broadcast " + shape_str(b.shape) + " onto " + shape_str(a.shape));
  const simd::KernelTable* k = ex.kernels();
  const int64_t W = a.pcols;
  const int phases = fidelity_phase_count(fidelity);
  for_rows(a, ex, 3, [&](int64_t bi, int64_t r, float* s) {
    float *sa = s, *sb = s + W, *so = s + 2 * W;
    const float* arow = a.matrix(bi) + r * W;
    const float* brow = b.matrix(broadcast_matrix(a, b, bi)) + (b.rows == 1 ? 0 : r) * b.pcols;
    for (int64_t c = 0; c < W; ++c) {
      sa[c] = unpack_to_src(arow[c], a.format, fp32);
      sb[c] = unpack_to_src(brow[c], b.format, fp32);
    }
    if (k) k->elwmul(sa, sb, 1, W, phases, fp32, so);
    else
      for (int64_t c = 0; c < W; ++c) so[c] = fpu_mul(sa[c], sb[c], fidelity, fp32);
    pack_from_dst(so, out.matrix(bi) + r * W, W, out.format, fp32, precise);
  });
}

}  // namespace mha::ttsim
