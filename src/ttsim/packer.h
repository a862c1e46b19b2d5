#pragma once
// The packer: Dst -> L1 in an op's output format, through the "pack source
// format" tt-metal programs for the op (PACR's intermediate format).
//
// tt-metal (tt_metal/jit_build/data_format.cpp, get_single_pack_src_format)
// picks, for a block-float output:
//   fp32 Dst:   Bfp8_b, or Float32 when the compute config's bfp8_pack_precise
//   16-bit Dst: Bfp8_b, or Float16_b (bf16) when bfp8_pack_precise
// and for a bf16 / fp32 output that format itself (16-bit Dst with a fp32
// output: bf16). Each pack source rounds differently (ttsim src/tensix.cpp,
// PACR): see pack_dst_value and docs/TTSIM.md "Packer".
#include <cstdint>

#include "ttsim/formats.h"

namespace mha::ttsim {

enum class PackSrc { Float32, Bfloat16, Bfp8_b };

const char* pack_src_name(PackSrc s);

// tt-metal's choice for an op writing `out` with this Dst mode and flag.
PackSrc pack_src_format(DataFormat out, bool fp32_dest, bool bfp8_pack_precise);

// Whether the packer has this (Dst mode, pack source, output) mode, i.e. ttsim
// accepts it (PACR's pack_fmt_conv_mode list). fp32 Dst with a bf16 source
// and a block-float output is not one: tt-metal never selects it.
bool pack_mode_supported(DataFormat out, bool fp32_dest, PackSrc src);

// One Dst value as the packer's 16-bit (or 32-bit, Float32 source) stage
// holds it before the output conversion:
//   fp32 Dst, Bfloat16 src: NaN -> Inf, round half away to bf16, exp 0 -> +0
//   fp32 Dst, Bfp8_b src:   NaN -> Inf, truncate to bf16, then round half up
//                           to 6 mantissa bits ("m6"), exp 0 -> +0
//   fp32 Dst, Float32 src:  the fp32 value; a block-float output then
//                           truncates it to bf16 (exp 0 -> +0, NaN kept)
//   16-bit Dst, Bfloat16:   NaN -> Inf, denormal -> +0
//   16-bit Dst, Bfp8_b:     as Bfloat16, then round half up to m6
// Returns the value as a float (bf16-exact for 16-bit stages).
float pack_dst_value(float dst, DataFormat out, bool fp32_dest, PackSrc src);

// Packs n Dst values to `out` (n a multiple of 16 for block-float outputs:
// face rows, each sharing an exponent) through pack source `src`. in and
// out may alias. Throws std::logic_error on a mode the packer does not have.
void pack_dst(const float* dst, float* out, int64_t n, DataFormat out_format, bool fp32_dest, PackSrc src);

// pack_dst with the pack source tt-metal selects.
inline void pack_from_dst(const float* dst, float* out, int64_t n, DataFormat out_format, bool fp32_dest,
                          bool bfp8_pack_precise) {
  pack_dst(dst, out, n, out_format, fp32_dest, pack_src_format(out_format, fp32_dest, bfp8_pack_precise));
}

}  // namespace mha::ttsim
