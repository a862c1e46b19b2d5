#pragma once
// Internal to src/ttsim: matrix-unit operands decoded once per matmul for the
// vector kernels (simd/kernels.h), from the values the unpacker delivers.
#include <cstdint>
#include <vector>

#include "ttsim/formats.h"
#include "ttsim/simd/kernels.h"
#include "util/aligned_vector.h"

namespace mha::ttsim::detail {

// in0 (SrcB role): rows x K values, element (r, k) at a[r*lda + k], K a
// multiple of 32 -> per row Kt*phases*32 record slots, (kt, p, k % 32) at
// (kt*phases + p)*32 + k % 32, row r at out + r*(K*phases). Only the even
// phases' slots are written: the kernels take the exponent and alignment of
// phase 0 for every phase and SrcB's piece from phase 0 or 2 (the odd
// phases change SrcA's piece alone); the odd slots keep what they held.
void decode_in0(const float* a, int64_t lda, int64_t rows, int64_t K, DataFormat f, bool fp32, int phases,
                simd::ARec* out);

// 1 + the last of `rows` rows decoded at `phases` (K*phases record slots
// each, as decode_in0 writes them) holding a non-zero operand; 0 when every
// row is zero. A zero row of in0 adds nothing to a zero Dst row in any
// phase (each group's max is not positive, so accumulate returns +0), so
// matmul leaves the trailing zero rows (the padding of a one-token decode
// step's 32-row tile) out of the kernel and their Dst rows stay +0.
int64_t live_rows(const simd::ARec* rec, int64_t rows, int64_t K, int phases);

// in1 (SrcA role) decoded for simd::In1, with the storage behind it.
// Each array starts on a cache line (the kernels' 64-byte loads of a column
// block then never span two lines), and rows of 256 columns or more are
// padded to an odd number of cache lines: with a stride of a multiple of
// 4 KB (keys as columns of K^T at 2K, 4K, ...) every row of a column block
// falls in one L1 set, which holds 12 lines, so the kernel's K loop read
// in1 from L2 (a third of the matmul's time at those shapes).
struct In1Buffer {
  AlignedVector<int16_t> exp16, pair16_hi, pair16_lo;
  int64_t ld = 0;
  // Room for K x N at a row stride ld >= N (the storage only grows: a
  // buffer reused for operands of changing shapes is not cleared again
  // each time).
  void resize(int64_t K, int64_t N);
  // View of the part starting at element (k0, c0) (c0 a multiple of 16).
  simd::In1 view(int64_t k0 = 0, int64_t c0 = 0) const;
};

// Decodes K x N values, element (k, n) at b[k*ks + n*ns], into rows
// [k0, k0 + K) of `out` (resized for N columns).
void decode_in1(const float* b, int64_t ks, int64_t ns, int64_t K, int64_t N, DataFormat f, bool fp32, In1Buffer& out,
                int64_t k0);

}  // namespace mha::ttsim::detail
