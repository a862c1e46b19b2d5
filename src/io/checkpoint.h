#pragma once
// A weights file whose tensor names, dtypes and shapes are known before any
// tensor is read, so a caller can pick one layer out of a checkpoint far
// larger than that layer, and refuse a wrong shape without reading its data:
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
// Names are hashed: opening and looking up are linear in the number of
// tensors (an index of 1e6 entries opens in about a second).
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor_file.h"
#include "tensor/tensor.h"

namespace mha::io {

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path);
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  // The file messages name: the index when one is followed.
  const std::string& source() const { return source_; }
  // Every tensor name, in file (or weight_map) order.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return find(name) != kNone; }
  // A tensor's dtype and shape, from its shard's header (opened, not its
  // data); InputError as read() gives for a missing shard or tensor.
  TensorInfo info(const std::string& name) const;
  // These tensors, in this order, reading only the shards that hold them.
  NamedTensors read(const std::vector<std::string>& names) const;

 private:
  void open_index(const std::string& index_path);
  void index_names();
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t find(std::string_view name) const;      // position in names_, or kNone
  std::size_t position(const std::string& name) const;  // InputError when absent
  // The reader of the shard holding names_[pos] (which must hold it), or
  // nullptr for the formats read whole.
  const SafetensorsReader* reader_for(std::size_t pos) const;

  std::string source_;
  std::vector<std::string> names_;
  std::vector<uint32_t> shard_of_;  // per name: its file in shards_ (unused for loaded_)
  std::vector<std::string> shards_;
  // Open-addressed hash of names_ (hash, position + 1; 0 empty): one cache
  // line per lookup, where a node-based map cost a third of a 1e6-entry open.
  std::vector<std::pair<uint64_t, uint32_t>> table_;
  NamedTensors loaded_;                                          // formats read whole
  mutable std::map<uint32_t, std::unique_ptr<SafetensorsReader>> readers_;
};

// True for "....index.json".
bool is_checkpoint_index(const std::string& path);

}  // namespace mha::io
