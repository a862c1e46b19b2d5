#pragma once
// The vector implementations of tt-sim's FPU and SFPU lanes, one table per
// instruction set, chosen at run time. Each kernel is bit-identical to the
// scalar lane model it replaces (src/ttsim/fpu.cpp, sfpu.cpp), which stays
// the oracle that tests/ttsim compares them with.
//
// Lanes run across output columns: for one row of in0 (SrcB, broadcast) and
// the columns of in1 (SrcA) in a vector, every step of a lane's dot product
// (the exponent max of a group of eight products, each product's alignment,
// the group sums, the Dst adder) is one vertical vector operation. A
// group's quantities all fit 16 bits, so its products run on 16-bit lanes
// (2W columns a vector) and only the Dst adder on W 32-bit lanes.
#include <cstdint>
#include <vector>

#include "ttsim/arch.h"
#include "vec/isa.h"

namespace mha::ttsim::simd {

// The project's ISA levels and probe (src/vec/isa.h); Scalar runs the lane
// models, which have no table.
using ::mha::vec::Isa;
using ::mha::vec::isa_name;

// Exponent of a zero operand: far enough below every real product exponent
// (>= -137) that it never wins a group's max, and shifts its (zero) product
// out entirely; small enough that two of them still fit in an int16.
constexpr int32_t kZeroExp = -8192;

// An int16 in both halves of an int32: a 32-bit broadcast from memory (a
// plain load on x86) then fills every 16-bit lane with it.
constexpr int32_t dup16(int32_t x) {
  return static_cast<int32_t>((static_cast<uint32_t>(x) & 0xffffu) * 0x10001u);
}

// One in0 (SrcB) datum as one fidelity phase sees it, each field dup16'd:
// the product exponent's share (exponent field, rebiased for the phase;
// kZeroExp for a zero); the phase's SrcB piece as the unsigned byte pair
// (piece, 1) (piece 0 for a zero), the first operand of a vpmaddubsw with an
// In1 pair; and 2^13 with the datum's sign, which the alignment shifts into
// each product's rounding multiplier (isa_avx2.cpp). pad keeps a record four
// 32-bit fields (decode_in0 writes them as a 4 x 4 transpose); it is 0.
struct ARec {
  int32_t exp;
  int32_t upair;
  int32_t mbase;
  int32_t pad;
};

// in1 (SrcA) decoded as int16s: element (k, n) at k*ld + n (ld a multiple
// of 32): exp16 its exponent field (kZeroExp for a zero), pair16 each piece
// ([0]: high piece, [1]: low piece) as the signed byte pair (4 piece s, s)
// with s the value's sign (+-1), the second operand of a vpmaddubsw whose
// first is ARec::upair: |b| * 4 piece s + s, the product quadrupled with its
// sign from in1 and a quarter-unit nudge that makes its rounding odd
// (isa_avx2.cpp).
struct In1 {
  const int16_t* exp16;
  const int16_t* pair16[2];
  int64_t ld;
};

// The int16 destinations of 16 consecutive In1 elements (encode_in1_16).
struct In1Words {
  int16_t* exp16;
  int16_t* pair16_hi;
  int16_t* pair16_lo;
};

struct KernelTable {
  Isa isa;
  int lanes;
  // dst[r, 0:ncols] (FP32 bit patterns, a BF16 value each when !fp32) +=
  // MVMUL over Kt tiles of K, for r < rows:
  //   for kt, for phase p < phases, for face f < 2:
  //     dst = dot16(in0[r, k-face], in1[k-face, :], dst, p)
  // arec: row r's records at arec + r*arec_stride, (kt, p, k in tile) at
  //   (kt*phases + p)*32 + k, read for p = 0 and 2 only (decode_in0).
  //   ncols is a multiple of 32.
  void (*mvmul)(const ARec* arec, int64_t arec_stride, int64_t rows, const In1& b, int64_t ncols, int64_t Kt,
                int phases, bool fp32, uint32_t* dst, int64_t ldd);
  // ELWMUL over `phases` with Dst zeroed first: out[i] = a[i] (SrcA) * b[i*bstep]
  // (SrcB; bstep 0 broadcasts one value). Inputs are Src values.
  void (*elwmul)(const float* a, const float* b, int64_t bstep, int64_t n, int phases, bool fp32, float* out);
  // ELWADD: out[i] = a[i] + b[i*bstep].
  void (*elwadd)(const float* a, const float* b, int64_t bstep, int64_t n, bool fp32, float* out);
  // exp_tile in approx mode with fast_and_approx (Schraudolph), then the
  // store to Dst (bf16 truncation unless fp32).
  void (*exp_fast_approx)(const float* x, int64_t n, bool fp32, float* out);
  // SFPMAD (sfpu_mad_bits for the table's arch) on FP32 bit patterns, out[i] = a[i] * b[i] + c[i],
  // n a multiple of 32, for operands that are finite with a product exponent
  // field below 255 (the kernels above handle Inf/NaN around it); tests
  // compare it with the model.
  void (*mad_finite)(const uint32_t* a, const uint32_t* b, const uint32_t* c, int64_t n, uint32_t* out);
  // The packer's L1 accumulation of bf16 partials, l1[i] = l1_acc_bf16(l1[i],
  // x[i]) (kblock.h), n a multiple of 32.
  void (*l1_acc_bf16)(float* l1, const float* x, int64_t n);

  // The host-side conversions (host_kernels.inc), the same bits in every
  // table and for both generations:
  // host_round_bf16 on the first n - n % 8 values (in and out may alias).
  void (*round_bf16)(const float* in, float* out, int64_t n);
  // host_quantize_bfp_row on each whole 16-value row of n (in and out may alias).
  void (*quantize_bfp)(const float* in, float* out, int64_t n, int mag_bits);
  // detail::decode_in0 (operands.h) for K a multiple of 8, its inputs'
  // bits masked with trunc_mask first (0xffff0000 truncates to bf16).
  void (*decode_in0)(const float* a, int64_t lda, int64_t rows, int64_t K, uint32_t trunc_mask, int phases,
                     ARec* out);
  // In1's fields (exponent, signed piece pairs) of 16 Src values.
  void (*encode_in1_16)(const uint32_t u[16], const In1Words& out);
  // encode_in1_16 on whole blocks of Src values (bf16 values, as every
  // non-Float32 tile tensor holds), In1 element (k, n) at out + k*ld + n:
  // rows: K x N read as b[k*ks + n] (N a multiple of 16);
  // transposed: b[k + n*ns] (K^T from K's rows; K a multiple of 8, N of 16),
  // through 8 x 8 transposes rather than 16 strided loads per encoded row.
  // One call per block, not one per 16 values through this table.
  void (*encode_in1_rows)(const float* b, int64_t ks, int64_t K, int64_t N, const In1Words& out, int64_t ld);
  void (*encode_in1_t)(const float* b, int64_t ns, int64_t K, int64_t N, const In1Words& out, int64_t ld);
  // The SDPA row max: the scalar loop's `x > m ? x : m` from -Inf over x[0, n).
  float (*row_max)(const float* x, int64_t n);
  // The packer's Bfloat16-source stage (packer.cpp) on the first n - n % 8
  // values; returns the count done.
  int64_t (*pack_bf16)(const float* dst, float* out, int64_t n, bool fp32_dest);
  // l1_acc_fp32 (kblock.h) on the first n - n % 8 values.
  void (*l1_acc_fp32)(float* l1, const float* x, int64_t n);
  // The streaming SDPA's check that ELWMUL by 1.0 at two phases or more on a
  // 16-bit Dst gives x back: every one of n values (n a multiple of 8) is +0
  // or bf16 with an exponent field from 6 to 254.
  bool (*times_one_keeps)(const float* x, int64_t n);
  // The streaming SDPA's score exp after its SFPMAD (sdpa_streaming_score_exp's
  // rounding, saturation, ReLU and 16-bit store) on n values of t, n a
  // multiple of 8 (out may alias t).
  void (*score_exp_store)(const float* t, float* out, int64_t n);
};

// The table for `isa` whose lanes compute as `arch` does, or nullptr when
// this CPU cannot run it (or isa is Scalar, which has no table: callers run
// the lane models). At the width of a level with no table of its own
// (Avx512Vnni) the widest one below it.
const KernelTable* kernels_for(Isa isa, Arch arch = Arch::Wormhole);
// The widest instruction set this CPU runs tables for.
Isa best_isa();
// The table of best_isa() (Wormhole's), for the host-side conversions,
// whose bits do not depend on the table. Every mha build requires AVX2
// (CMakeLists.txt), so there always is one.
const KernelTable& host_kernels();
// Every vector instruction set this CPU runs (what tests compare with Scalar).
std::vector<Isa> vector_isas();

}  // namespace mha::ttsim::simd
