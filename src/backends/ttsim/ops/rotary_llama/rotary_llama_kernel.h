#pragma once
// ttnn.experimental.rotary_embedding_llama: out = x * cos + (x @ T) * sin,
// with T the 32x32 transformation tile (T[2i][2i+1] = 1, T[2i+1][2i] = -1:
// x @ T swaps each interleaved pair and negates, (x0, x1) -> (-x1, x0)).
// As tt-metal's compute kernels run it (rotary_embedding_llama.cpp for
// prefill, rotary_embedding_llama_sharded.cpp for decode), per 32-column tile:
//   rotated  = x @ T               matmul_tiles, one K tile in Dst -> x's format
//   sin_im   = rotated * sin       ELWMUL (rotated in SrcA)         -> sin's format
//   cos_im   = x * cos             ELWMUL                           -> cos's format
//   out      = cos_im + sin_im     ELWADD                           -> the output format
// The intermediate buffers take those formats in the program factory.
#include "ttsim/exec.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// The transformation tile TT-NN's get_rot_transformation_mat builds (32x32).
TileTensor rotary_llama_trans_mat(DataFormat format);

enum class RotaryMode { Prefill, Decode };

// Prefill: x [b, nh, S, dh], cos/sin [1, 1, S, dh] or [1, nh, S, dh].
// Decode:  x [1, b, nh, dh], cos/sin [1, b, 1, dh] (the row broadcast over the
//          heads, as the sharded kernel's ROW broadcast does; a [1, b, 32, dh]
//          table uses its first row).
// trans [1, 1, 32, 32]. cfg.output is the output format; the compute config's
// fidelity and Dst mode apply to every step. Throws InputError on shapes.
TileTensor tt_rotary_llama(const TileTensor& x, const TileTensor& cos, const TileTensor& sin, const TileTensor& trans,
                           RotaryMode mode, const ComputeConfig& cfg, const Exec& ex = Exec{});

}  // namespace mha::ttsim
