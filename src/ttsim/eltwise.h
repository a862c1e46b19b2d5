#pragma once
// TT-NN's FPU eltwise ops on tile tensors: inputs as the unpacker delivers
// them, one ELWADD / ELWMUL per element, results packed to the output format.
// Rows run on the Exec's pool; with Isa::Scalar every lane runs the lane
// model (fpu_add / fpu_mul), otherwise the vector kernels (bit-identical).
#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// out = a + b, out preallocated with a's shape. b broadcasts over a's
// leading dims where b has 1 (right-aligned) and over rows when b has one
// row (a bias, or a (b,1,1,s) attention mask). Throws InputError when b does
// not broadcast onto a. bfp8_pack_precise: the packer's source format for a
// block-float out (packer.h).
// `arch` (last, every op here): whose matrix unit computes (arch.h).
void tt_add(const TileTensor& a, const TileTensor& b, TileTensor& out, bool fp32_dest, bool bfp8_pack_precise,
            const Exec& ex = Exec{}, Arch arch = Arch::Wormhole);

// out = a * b elementwise (ttnn.multiply(a, b)): ELWMUL over the phases of
// `fidelity`, a in SrcA, b in SrcB, b broadcast as in tt_add. Throws
// InputError when b does not broadcast onto a.
void tt_mul(const TileTensor& a, const TileTensor& b, TileTensor& out, MathFidelity fidelity, bool fp32_dest,
            bool bfp8_pack_precise, const Exec& ex = Exec{}, Arch arch = Arch::Wormhole);

// out = a * s for a Python float s: s becomes a bf16 operand (SrcB) of an
// ELWMUL run over the phases of `fidelity`.
void tt_mul_scalar(const TileTensor& a, float s, TileTensor& out, MathFidelity fidelity, bool fp32_dest,
                   bool bfp8_pack_precise, const Exec& ex = Exec{}, Arch arch = Arch::Wormhole);

}  // namespace mha::ttsim
