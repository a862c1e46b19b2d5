#pragma once
// The entry points the Python package (python/, mha.ttnn) calls besides
// run_tt_op: TT-NN's data-movement ops (permute, reshape, the transformer
// head splits and concatenation) on host values, as tt-sim's pipelines run
// them. Kept apart from the op table so that binding code depends on these
// few functions only.
#include <string>

#include "tensor/tensor.h"
#include "ttsim/formats.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// A data-movement op: `in` (float32, its logical shape, values exactly the
// device's in `in_format`) becomes `moved` (float32, the result's logical
// shape, the same values rearranged by the caller) in `out_format`, as the
// device's transpose / untilize-retilize kernels write it: bf16 and float32
// values move exactly, a block-float result is repacked by the packer (its
// shared exponents follow the new face rows). `op` names the program
// ("ttnn.permute"). Returns the result's values (float32, logical shape).
Tensor tt_move(const Tensor& in, DataFormat in_format, const Tensor& moved, DataFormat out_format,
               const std::string& op);
// The same result as the device's tiles (kept on the device by mha.ttnn).
TileTensor tt_move_tiles(const Tensor& in, DataFormat in_format, const Tensor& moved, DataFormat out_format,
                         const std::string& op);

}  // namespace mha::ttsim
