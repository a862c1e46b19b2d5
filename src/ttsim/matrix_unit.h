#pragma once
// The Tensix matrix unit (FPU) and the packer, as TT-NN's matmul uses them.
//
// matmul(in0, in1): in0 is unpacked to SrcB, in1 to SrcA, and each MVMUL adds
// an 8x16 (SrcB rows) by 16x16 (SrcA) product into Dst. The multipliers see
// at most 7 significand bits of SrcB and 5 of SrcA, so math fidelity picks
// how many phases (each one MVMUL) run:
//   phase 0: SrcA hidden+4 top bits  x SrcB hidden+6 top bits
//   phase 1: SrcA next bits (3 of bf16) x SrcB hidden+6 top bits
//   phase 2: SrcA hidden+4 top bits  x SrcB last bit (bf16)
//   phase 3: SrcA next bits             x SrcB last bit
// LoFi runs phase 0, HiFi2 phases 0-1, HiFi3 0-2, HiFi4 0-3. Each phase's
// 16-term dot product is aligned and rounded as two groups of 8, then added
// into Dst (FP32, or BF16 re-rounded on every add). Rules and sources:
// docs/TTSIM.md.
#include <cstdint>
#include <cstring>
#include <string>

#include "ttsim/arch.h"
#include "ttsim/exec.h"
#include "ttsim/formats.h"
#include "ttsim/kblock.h"
#include "ttsim/packer.h"
#include "ttsim/revision.h"
#include "ttsim/tile.h"
#include "util/fields.h"

namespace mha::ttsim {

enum class MathFidelity { LoFi = 0, HiFi2 = 2, HiFi3 = 3, HiFi4 = 4 };
// Exact is the only mode: the vector kernels reproduce the lane models bit
// for bit at a speed close enough to an sgemm-based approximation's that
// the approximation does not pay for its error (docs/TTSIM.md, "Matrix unit
// (FPU)").
enum class Numerics { Exact };

const char* fidelity_name(MathFidelity f);
MathFidelity fidelity_from_name(const std::string& name);  // throws InputError
const char* numerics_name(Numerics n);
Numerics numerics_from_name(const std::string& name);
// {name, value} lists for util/fields.h.
const std::vector<std::pair<const char*, MathFidelity>>& field_choices(MathFidelity*);
const std::vector<std::pair<const char*, Numerics>>& field_choices(Numerics*);  // "exact"; throws InputError (says why "fast" went)
// Number of fidelity phases the LLK runs (LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4).
int fidelity_phase_count(MathFidelity f);

// TT-NN's WormholeComputeKernelConfig plus tt-sim's numerics switch and the
// op's output dtype. bfp8_pack_precise picks the packer's source format for
// block-float outputs (packer.h): false (TT-NN's default) packs through
// Bfp8_b, true through Float32 (fp32 Dst) or bf16 (16-bit Dst).
struct ComputeConfig {
  MathFidelity math_fidelity = MathFidelity::HiFi2;
  bool fp32_dest_acc_en = false;
  bool math_approx_mode = true;
  Numerics numerics = Numerics::Exact;
  DataFormat output = DataFormat::Bfloat16;
  bool bfp8_pack_precise = false;
  // The generation whose datapaths compute (arch.h); the backend derives
  // it from the device.
  Arch arch = Arch::Wormhole;
  // Whose kernels the op emulates (revision.h): softmax's reciprocal, which
  // SDPA program; the backend's `tt_metal` option sets it.
  TtMetal tt_metal = kDefaultTtMetal;

  // The fields (util/fields.h): TT-NN's compute kernel config and the
  // output's packing, which key every program that computes; `flags` go to
  // every field (the options set them, not the op's own keys).
  template <class V>
  void fields(V& v, unsigned flags = 0) {
    v("math_fidelity", math_fidelity, "the FPU's fidelity phases", flags);
    v("math_approx_mode", math_approx_mode, "the SFPU's approximate functions", flags);
    v("fp32_dest_acc_en", fp32_dest_acc_en, "a 32-bit Dst", flags);
    v("numerics", numerics, "the numeric model", flags);
    v("output", output, "the output's dtype", flags);
    v("bfp8_pack_precise", bfp8_pack_precise, "the packer's source for a block-float output", flags);
    v("arch", arch, "whose datapaths compute, from the device", flags | fields::kDerived);
    v("tt_metal", tt_metal, "whose kernels, from the tt_metal option", flags | fields::kDerived);
  }
};

// --- bit-level primitives (exact numerics) ------------------------------------

// One MVMUL lane for one fidelity phase: dst + sum_k srcb[k] * srca[k] over
// 16 terms, as the FPU rounds it. srcb are in0 values (one row of A), srca
// in1 values (one column of B); both must already be what Src holds (bf16
// values, or tf32 when tf32_src). dst and the result are Dst values: FP32
// when fp32_dest, else bf16 values.
float fpu_dot16(const float* srcb, const float* srca, float dst, int phase, bool fp32_dest,
                bool tf32_src = false, Arch arch = Arch::Wormhole);
// ELWMUL lane for one phase: dst + srca * srcb (partial product of the phase).
float fpu_mul_phase(float srca, float srcb, float dst, int phase, bool fp32_dest, Arch arch = Arch::Wormhole);
// A full elementwise product over the phases of `fidelity`, Dst zeroed first.
float fpu_mul(float srca, float srcb, MathFidelity fidelity, bool fp32_dest, Arch arch = Arch::Wormhole);
// ELWADD / ELWSUB lane (Dst not accumulated): a + b or a - b.
float fpu_add(float a, float b, bool fp32_dest, Arch arch = Arch::Wormhole);

// What Src holds after unpacking a value of format `f`: Float32 inputs are
// truncated to TF32 when fp32_dest_acc_en, else to BF16 (denormals flushed);
// other formats are already bf16-exact. A block-float TileTensor stores the
// values as the host reads them back (decode_bfp_row, which flushes a
// negative exponent); the unpacker wraps it instead (unpack_bfp_row_to_src),
// but no row a tt-metal encoder writes has one, so both give these values.
inline float unpack_to_src(float x, DataFormat f, bool fp32_dest) {
  if (f != DataFormat::Float32) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u & 0x7f800000u) == 0 ? (u & 0x80000000u) : (u & (fp32_dest ? 0xffffe000u : 0xffff0000u));  // truncation
  std::memcpy(&x, &u, 4);
  return x;
}

// out = a @ b.  a: (..., M, K); b: (..., K, N) with the same leading dims as
// a, or (K, N) shared by every batch; out becomes (..., M, N) in cfg.output.
// Exact numerics run the bit-level model for every lane (M*N*K*phases/16
// lane-dots): with ex.isa Scalar the lane model itself (the oracle), else
// the vector kernels, bit-identical to it, over 32-row blocks on ex's pool.
// `blk` splits K into blocks as TT-NN's multicast programs do (kblock.h);
// the default keeps all of K in Dst. With blk.bias_fused, cfg.output must be
// blk.interm (the buffer the bias add reads).
// Throws InputError on mismatched shapes.
void tt_matmul(const TileTensor& a, const TileTensor& b, TileTensor& out, const ComputeConfig& cfg,
               const Exec& ex = Exec{}, const MatmulBlocking& blk = MatmulBlocking{});

}  // namespace mha::ttsim
