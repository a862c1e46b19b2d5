#pragma once
// Weights from a file or folder, optionally one layer of a larger checkpoint
// picked by a name prefix ("model.layers.0.self_attn."): see io/checkpoint.h
// for the files understood (safetensors, Hugging Face sharded indexes, npz...).
#include <optional>
#include <string>

#include "variants/variant.h"

namespace mha {

// Without a prefix every tensor of `path` must be one of v's weights (an
// extra tensor is an error). With one, only tensors whose names start with it
// are considered, the prefix is stripped, and those that name a weight of v
// are read (others are ignored, and shards holding none are never opened).
// bfloat16 / float16 tensors are widened exactly to float32. Dtypes and
// shapes are checked from the files' headers before any tensor data is read;
// a weight holding NaN or Inf is refused.
TensorMap load_checkpoint_weights(const Variant& v, const std::string& path, const std::optional<std::string>& prefix);

}  // namespace mha
