#pragma once
// A weights file whose tensor names are listed before any tensor is read, so a
// caller can pick one layer out of a checkpoint far larger than that layer:
//  - a .safetensors file (only the picked tensors' bytes are read);
//  - a Hugging Face sharded checkpoint's index, NAME.safetensors.index.json:
//      {"metadata": {...}, "weight_map": {"TENSOR": "NAME-00001-of-00002.safetensors", ...}}
//    whose shard files (relative to the index's folder, never outside it) are
//    opened only when a picked tensor lives in them;
//  - one shard of such a checkpoint, NAME-00001-of-00002.safetensors: when
//    NAME.safetensors.index.json beside it lists it, the index is followed, so
//    a layer split across shards is found whole;
//  - anything read_all reads (.npy, .npz, a folder of .npy), read whole.
// Errors (malformed index, missing shard, a tensor absent from the shard it is
// mapped to, a shard path escaping the folder) are one-line InputErrors.
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mha::io {

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path);
  // The file messages name: the index when one is followed.
  const std::string& source() const { return source_; }
  // Every tensor name, in file (or weight_map) order.
  const std::vector<std::string>& names() const { return names_; }
  // These tensors, in this order, reading only the shards that hold them.
  NamedTensors read(const std::vector<std::string>& names) const;

 private:
  void open_index(const std::string& index_path);

  std::string source_;
  std::vector<std::string> names_;
  std::vector<std::string> file_of_;  // per name: the .safetensors file holding it; empty for `loaded_`
  NamedTensors loaded_;               // formats read whole
};

// True for "....index.json".
bool is_checkpoint_index(const std::string& path);

}  // namespace mha::io
