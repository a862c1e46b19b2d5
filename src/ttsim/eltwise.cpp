#include "ttsim/eltwise.h"

#include <vector>

#include "util/error.h"

namespace mha::ttsim {

namespace {

// Index of b's matrix for a's matrix bi: leading dims right-aligned, b's
// size-1 dims broadcast.
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

// b broadcasts onto a: same columns, one row or a's rows, and leading dims
// (right-aligned) of 1 or a's.
bool broadcasts_onto(const TileTensor& a, const TileTensor& b) {
  if (b.cols != a.cols || (b.rows != 1 && b.rows != a.rows)) return false;
  const int na = static_cast<int>(a.shape.size()) - 2, nb = static_cast<int>(b.shape.size()) - 2;
  if (nb > na && nb > 0) return false;
  for (int d = 0; d < nb; ++d)
    if (b.shape[d] != 1 && b.shape[d] != a.shape[d + na - nb]) return false;
  return true;
}

void unpack_row(const float* in, int64_t n, DataFormat f, bool fp32, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = unpack_to_src(in[i], f, fp32);
}

// Runs row(bi, r, scratch a, scratch b, scratch out) for every padded row of
// a, on the pool; rows are independent.
template <class Fn>
void for_rows(const TileTensor& a, const Exec& ex, Fn fn) {
  const int64_t rows = a.batch * a.prows, chunk = 32;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for((rows + chunk - 1) / chunk, [&](int64_t t, int th) {
    std::vector<float>& s = scratch[static_cast<size_t>(th)];
    s.resize(static_cast<size_t>(3 * a.pcols));
    for (int64_t g = t * chunk; g < rows && g < (t + 1) * chunk; ++g)
      fn(g / a.prows, g % a.prows, s.data(), s.data() + a.pcols, s.data() + 2 * a.pcols);
  });
}

}  // namespace

void tt_add(const TileTensor& a, const TileTensor& b, TileTensor& out, bool fp32, bool bfp8_pack_precise,
            const Exec& ex, Arch arch) {
  if (!broadcasts_onto(a, b))
    throw InputError("tt-sim: add: cannot broadcast " + shape_str(b.shape) + " onto " + shape_str(a.shape));
  const simd::KernelTable* k = ex.kernels(arch);
  const int64_t W = a.pcols;
  for_rows(a, ex, [&](int64_t bi, int64_t r, float* sa, float* sb, float* so) {
    const float* brow = b.matrix(broadcast_matrix(a, b, bi)) + (b.rows == 1 ? 0 : r) * b.pcols;
    unpack_row(a.matrix(bi) + r * W, W, a.format, fp32, sa);
    unpack_row(brow, W, b.format, fp32, sb);
    if (k) k->elwadd(sa, sb, 1, W, fp32, so);
    else
      for (int64_t c = 0; c < W; ++c) so[c] = fpu_add(sa[c], sb[c], fp32, arch);
    pack_from_dst(so, out.matrix(bi) + r * W, W, out.format, fp32, bfp8_pack_precise);
  });
}

void tt_mul(const TileTensor& a, const TileTensor& b, TileTensor& out, MathFidelity fidelity, bool fp32,
            bool bfp8_pack_precise, const Exec& ex, Arch arch) {
  if (!broadcasts_onto(a, b))
    throw InputError("tt-sim: multiply: cannot broadcast " + shape_str(b.shape) + " onto " + shape_str(a.shape));
  const simd::KernelTable* k = ex.kernels(arch);
  const int64_t W = a.pcols;
  const int phases = fidelity_phase_count(fidelity);
  for_rows(a, ex, [&](int64_t bi, int64_t r, float* sa, float* sb, float* so) {
    const float* brow = b.matrix(broadcast_matrix(a, b, bi)) + (b.rows == 1 ? 0 : r) * b.pcols;
    unpack_row(a.matrix(bi) + r * W, W, a.format, fp32, sa);
    unpack_row(brow, W, b.format, fp32, sb);
    if (k) k->elwmul(sa, sb, 1, W, phases, fp32, so);
    else
      for (int64_t c = 0; c < W; ++c) so[c] = fpu_mul(sa[c], sb[c], fidelity, fp32, arch);
    pack_from_dst(so, out.matrix(bi) + r * W, W, out.format, fp32, bfp8_pack_precise);
  });
}

void tt_mul_scalar(const TileTensor& a, float s, TileTensor& out, MathFidelity fidelity, bool fp32,
                   bool bfp8_pack_precise, const Exec& ex, Arch arch) {
  const float sb = host_round_bf16(s);
  const simd::KernelTable* k = ex.kernels(arch);
  const int64_t W = a.pcols;
  for_rows(a, ex, [&](int64_t bi, int64_t r, float* sa, float*, float* so) {
    unpack_row(a.matrix(bi) + r * W, W, a.format, fp32, sa);
    if (k) k->elwmul(sa, &sb, 0, W, fidelity_phase_count(fidelity), fp32, so);
    else
      for (int64_t c = 0; c < W; ++c) so[c] = fpu_mul(sa[c], sb, fidelity, fp32, arch);
    pack_from_dst(so, out.matrix(bi) + r * W, W, out.format, fp32, bfp8_pack_precise);
  });
}

}  // namespace mha::ttsim
