#pragma once
// The emulated device's bookkeeping: the program cache (keyed as TT-NN keys
// programs: op name + attributes + every input's shape, dtype, layout and
// memory config) and the memory check each op runs before it allocates.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/ttsim/ttsim_options.h"
#include "ttsim/tile.h"

namespace mha::ttsim {

// Bytes of one 32x32 tile (block floats: 16 exponent bytes per face).
int64_t tile_bytes(DataFormat f);
int64_t tile_count(const TileTensor& t);
int64_t tile_count(const Shape& shape);

class TtDevice {
 public:
  explicit TtDevice(TtOptions o) : opt_(std::move(o)) {}
  const TtOptions& options() const { return opt_; }
  MemoryKind memory() const { return memory_; }
  void set_memory(MemoryKind m) { memory_ = m; }
  // While muted, ops register no programs and allocate no buffers: the steps
  // of one fused TT-NN op (a linear's bias, attention_softmax_'s scale, mask
  // and in-place softmax) share its program and its output.
  void set_muted(bool m) { muted_ = m; }
  bool muted() const { return muted_; }

  // Looks the op's program up; a miss "compiles" it. Counts per op name.
  void program(const std::string& op, const std::string& attrs, const std::vector<const TileTensor*>& inputs);

  // Throws DeviceOutOfMemory when the op's inputs, its output, the resident
  // tensors and `cb_bytes_per_core` of circular buffers do not fit in one
  // bank (L1: one per worker core; DRAM: the whole DRAM).
  void check_memory(const std::string& op, const std::vector<const TileTensor*>& inputs, const Shape& out_shape,
                    DataFormat out_format) const;
  void check_memory_cb(const std::string& op, const std::vector<const TileTensor*>& inputs, const Shape& out_shape,
                       DataFormat out_format, int64_t cb_bytes_per_core) const;
  // Tensors kept on the device across ops (weights, biases, masks).
  void set_resident(const std::vector<const TileTensor*>& tensors);

  CacheStats stats() const { return total_; }
  // Every program compiled so far, by its cache key (tests check what an
  // op's program was keyed on).
  std::vector<std::string> program_keys() const;
  nlohmann::json per_op_json() const;

 private:
  int64_t banks() const;
  int64_t bank_bytes(int64_t tiles, DataFormat f) const;

  TtOptions opt_;
  MemoryKind memory_ = MemoryKind::L1;
  bool muted_ = false;
  std::map<std::string, int> programs_;
  std::map<std::string, CacheStats> per_op_;
  CacheStats total_;
  int64_t resident_per_bank_ = 0, resident_total_ = 0;
};

// The inner steps of one fused TT-NN op register no programs and allocate
// nothing of their own: mutes the device for a scope (or not, `on` false)
// and gives back the state it found, so scopes nest.
class Muted {
 public:
  explicit Muted(TtDevice& dev, bool on = true) : dev_(dev), prev_(dev.muted()) {
    if (on) dev_.set_muted(true);
  }
  ~Muted() { dev_.set_muted(prev_); }
  Muted(const Muted&) = delete;
  Muted& operator=(const Muted&) = delete;

 private:
  TtDevice& dev_;
  bool prev_;
};

}  // namespace mha::ttsim
