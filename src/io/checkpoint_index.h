#pragma once
// The weight_map of a Hugging Face sharded checkpoint's index,
// NAME.safetensors.index.json, streamed: {"metadata": {...}, "weight_map":
// {"TENSOR": "SHARD.safetensors", ...}}. Mixture-of-experts checkpoints list
// about 1e5 tensors, so the entries go straight into vectors as the parser
// meets them (an insertion-ordered JSON object checks every key against every
// earlier one: quadratic). Time and memory are linear in the entries.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mha::io {

struct CheckpointIndex {
  std::vector<std::string> names;    // weight_map keys, in file order
  std::vector<uint32_t> shard_of;    // per name: its shard in `shards`
  std::vector<std::string> shards;   // distinct shard paths, index folder / file, normalized
};

// InputError naming `path` (the index file, for messages and as the folder
// shards are resolved against) when the text is not JSON, nests too deep,
// is not an object, has no non-empty object "weight_map", a non-object
// "metadata", a value that is not a shard file name, a shard path leaving
// the index's folder. (A tensor listed twice is left to the caller, which
// hashes the names anyway.)
CheckpointIndex parse_checkpoint_index(std::string_view text, const std::string& path);

}  // namespace mha::io
