#pragma once
// The tile-level steps of tt-metal's SDPA compute kernels (sdpa.cpp and the
// helpers later split into compute_common.hpp), on the values of one or
// more rows: each step reads circular-buffer (CB) values, runs the FPU or
// SFPU instruction the kernel runs, and packs the Dst result back to the
// CB's format. Every intermediate CB of SDPA (qk_im, out_im, out_acc, the
// max/sum statistics) is Float16_b whatever fp32_dest_acc_en says, so
// "pack" here is Dst -> bfloat16 as the packer writes it: for a 16-bit Dst
// NaN -> Inf and denormals -> +0, for an FP32 Dst round half away from zero.
//
// Rows are independent in every step, so a caller may run any subset of
// rows. A "column" CB (a statistic: row max, row sum, exp(m_old - m_new),
// 1/sum) is one value per row here: the kernel keeps it in column 0 of a
// tile and every consumer broadcasts that column.
//
// Each step runs the lane models (kern == nullptr: the oracle) or the
// vector kernels (bit-identical). Shared by SDPA prefill and decode.
#include <cstdint>
#include <limits>
#include <vector>

#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/operands.h"
#include "ttsim/simd/kernels.h"

namespace mha::ttsim {

// A masked score, and the running max before any key.
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The compute config every step of one SDPA kernel runs under.
struct TileMath {
  MathFidelity fidelity = MathFidelity::HiFi2;
  int phases = 2;  // fidelity_phase_count(fidelity)
  bool fp32 = false;                         // fp32_dest_acc_en
  bool approx = true;                        // math_approx_mode: recip_tile's APPROX
  const simd::KernelTable* kern = nullptr;   // nullptr: the lane models (else kernels of `arch`)
  Arch arch = Arch::Wormhole;
  TileMath() = default;
  TileMath(MathFidelity f, bool fp32_dest, bool math_approx, const simd::KernelTable* k, Arch a = Arch::Wormhole);
};

// Dst values -> the bfloat16 CB, in place.
void sdpa_pack_bf16(float* x, int64_t n, const TileMath& m);

// mul_block_bcast_scalar_inplace / mul_block_bcast_cols: x = pack(ELWMUL(x
// in SrcA, s in SrcB)) at the kernel's fidelity. s must be a bf16 value.
void sdpa_mul_bcast(float* x, int64_t n, float s, const TileMath& m);

// The float's top 16 bits (truncation to bf16): how prefill's reader puts
// the scale in its bf16 scalar tile and decode's statistics' exp takes it
// (scale_fp32 >> 16).
float sdpa_truncate_bf16(float x);

// calculate_exponential_first_column<exp_approx_mode, scale_bf16, fp32>
// (ckernel_sfpu_sdpa.h of compute_common.hpp's 637d956c generation): what
// sub_exp_block gives exp((m_old - m_new) * scale) at tt_metal latest, d
// the ELWSUB result. The flag is inverted there (tt-metal PR #56925): true
// runs _ckernel_sfpu_exp_accurate_ (below), false
// calculate_exponential_polynomial (d times the bf16 scale, k = round(x/ln2)
// as int8, a polynomial in x - k ln2 of degree 4 with an fp32 Dst and 2 with
// a 16-bit one (rounded to bf16 by SFP_STOCH_RND), times 2^k from k + 127
// as the exponent field, 0 where that is not positive). The stored Dst value.
float sdpa_exp_first_column(float d, float scale_bf16, bool exp_approx_mode, bool fp32, Arch arch);
// _ckernel_sfpu_exp_accurate_<SCALE_EN>: d times the bf16 scale on the SFPU,
// then the fp32 exp (fp32 Dst) or exp_21f (16-bit Dst); the LReg value,
// before any store (correction_block's exps take it whatever the flag).
float sdpa_exp_accurate_scaled(float d, float scale_bf16, bool fp32, Arch arch);

// add_block_inplace: a = pack(ELWADD(a, b)), n values.
void sdpa_add(float* a, const float* b, int64_t n, const TileMath& m);

// reduce_c<MAX, REDUCE_ROW>: the row max, exact (max of bf16 values against
// a scaler of 1.0); -inf for a fully masked row.
float sdpa_row_max(const float* x, int64_t n);

// sub_exp_block_bcast_cols_inplace: x = pack(exp(ELWSUB(x, m))) with the
// SFPU exp in approx mode when `approx_exp` (the kernel hard-codes
// exp_tile<true> here), else the accurate exp of this Dst mode.
void sdpa_sub_exp(float* x, int64_t n, float m, bool approx_exp, const TileMath& tm);

// sub_exp_block on one statistic: pack(exp(ELWSUB(a, b))) (EXP_APPROX_MODE).
float sdpa_sub_exp1(float a, float b, bool approx_exp, const TileMath& m);
// mul_block_inplace on one statistic: pack(ELWMUL(a in SrcA, b in SrcB)).
float sdpa_mul1(float a, float b, const TileMath& m);
// add_block_inplace on one statistic.
float sdpa_add1(float a, float b, const TileMath& m);
// recip_block_inplace: pack(recip_tile(x)), tt-metal's reciprocal of the
// revision read (1/ln2 seed and Newton steps: sfpu_reciprocal_legacy).
float sdpa_recip1(float x, const TileMath& m);

// Work space for the matrix-unit steps (one per thread).
struct SdpaScratch {
  std::vector<simd::ARec> arec;
  detail::In1Buffer in1;
  std::vector<uint32_t> dst;
  std::vector<float> t;
};

// reduce_c<SUM, REDUCE_ROW>: for rows r < rows of x (row r at x + r*ld, n
// values, n a multiple of 32) the row sum as the matrix unit reduces it
// (data in SrcA, the scaler 1.0 in SrcB, tile by tile, phases outer, faces
// inner, in Dst), packed: sums[r].
void sdpa_row_sums(const float* x, int64_t ld, int64_t rows, int64_t n, const TileMath& m, SdpaScratch& s,
                   float* sums);

// matmul_blocks with all of K in Dst (in0_block_w = K tiles): out[r, c] =
// pack(sum_k a[r, k] * b(k, c)) for r < rows, c < N (N a multiple of 32),
// a row r at a + r*lda (SrcB), b(k, c) = b[k*ks + c*ns] (SrcA; ks = 1 and
// ns = K is a transposed operand such as K^T in Q @ K^T). Per output tile:
// K tiles outer, phases, faces inner. Values are CB values (bf16 or block
// float, exact in Src).
void sdpa_matmul(const float* a, int64_t lda, int64_t rows, int64_t K, const float* b, int64_t ks, int64_t ns,
                 int64_t N, const TileMath& m, SdpaScratch& s, float* out, int64_t ldo);

// The lane models' matmul_blocks with all of K in Dst (in0 in SrcB, in1 in
// SrcA), the Dst left unpacked: per output, K tiles outer, fidelity phases,
// faces inner. in0 is a Float32 CB (TF32 in Src; m.fp32 must hold) when
// a_f32, else bf16-exact values; in1 element (k, c) is b[k*ks + c*ns].
// sdpa_matmul's oracle, and the fp32-Dst kernel's (sdpa_standard.cpp).
void sdpa_matmul_lanes(const float* a, int64_t lda, int64_t rows, int64_t K, bool a_f32, const float* b, int64_t ks,
                       int64_t ns, int64_t N, const TileMath& m, float* out, int64_t ldo);

// The same with in1 already decoded (the vector kernels only; b1 rows
// [k0, k0 + K), columns [c0, c0 + N), c0 a multiple of 16): the fast path
// decodes K^T and V once per head and reuses them for every chunk.
void sdpa_matmul_decoded(const float* a, int64_t lda, int64_t rows, int64_t K, const detail::In1Buffer& b1,
                         int64_t k0, int64_t c0, int64_t N, const TileMath& m, SdpaScratch& s, float* out,
                         int64_t ldo);

// The matrix-unit pass itself with both operands decoded (the vector
// kernels only): in0 as decode_in0's records (row r at arec + r*K*phases),
// in1 a view; out[r, c] for r < rows, c < N is the Dst, left unpacked. A q
// chunk decodes Q once for every k chunk it visits.
void sdpa_mvmul(const simd::ARec* arec, int64_t rows, int64_t K, const simd::In1& b1, int64_t N, const TileMath& m,
                float* out, int64_t ldo);

// K^T (the QK matmul's in1) and V (s_k x dv) of every kv head, decoded once
// for all the q chunks that read them, over ex's pool; fp32: the Dst mode.
// K^T is stored in blocks of `keys` keys (a multiple of 32 dividing s_k):
// block j, keys [j*keys, (j+1)*keys), is rows [j*dh, (j+1)*dh) with ld =
// keys (view(j*dh, 0)). A k chunk's block is then contiguous: a whole-row
// ld of s_k * 2 bytes puts a multiple of 4 KiB between the rows one
// matmul reads, and those rows evict one another from the L1 cache.
void sdpa_decode_kv(const TileTensor& k, const TileTensor& v, bool fp32, int64_t keys, const Exec& ex,
                    std::vector<detail::In1Buffer>& kt, std::vector<detail::In1Buffer>& vd);

}  // namespace mha::ttsim
