#pragma once
// The emulated device's bookkeeping: the program cache (keyed as TT-NN keys
// programs: op name + attributes + every input's shape, dtype, layout and
// memory config) and the memory check each op runs before it allocates.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/ttsim/ttsim_options.h"
#include "ttsim/exec.h"
#include "ttsim/tile.h"
#include "util/thread_pool.h"

namespace mha::ttsim {

// Bytes of one 32x32 tile (block floats: 16 exponent bytes per face).
int64_t tile_bytes(DataFormat f);
int64_t tile_count(const TileTensor& t);
int64_t tile_count(const Shape& shape);

class TtDevice {
 public:
  explicit TtDevice(TtOptions o);
  const TtOptions& options() const { return opt_; }
  // How ops compute on the host: the options' kernels on this device's pool.
  const Exec& exec() const { return exec_; }
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
  // Per op name: program-cache hits and misses, and host time over every
  // call (all runs), with the emulated multiply-add phases of matmuls.
  nlohmann::json per_op_json() const;

  // One-line notes an op leaves for the user: a flag the emulated kernel
  // ignores or inverts at this tt_metal profile, a wrong result tt-metal's
  // issues record and the emulation reproduces. Each note once, in order;
  // `mha op`, `mha run` and --json print them.
  void note(const std::string& line);
  const std::vector<std::string>& notes() const { return notes_; }

  // Times one op call on the host (muted inner steps count for the op name
  // they are called with); mac_phases: lane multiply-adds x fidelity phases.
  class OpTimer {
   public:
    OpTimer(TtDevice& d, std::string op, double mac_phases = 0)
        : d_(d), op_(std::move(op)), macs_(mac_phases), t0_(std::chrono::steady_clock::now()) {}
    ~OpTimer();
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    TtDevice& d_;
    std::string op_;
    double macs_;
    std::chrono::steady_clock::time_point t0_;
  };

 private:
  int64_t banks() const;
  int64_t bank_bytes(int64_t tiles, DataFormat f) const;

  TtOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
  Exec exec_;
  MemoryKind memory_ = MemoryKind::L1;
  bool muted_ = false;
  std::map<std::string, int> programs_;
  std::map<std::string, CacheStats> per_op_;
  struct OpTime {
    int64_t calls = 0;
    double seconds = 0, mac_phases = 0;
  };
  std::map<std::string, OpTime> times_;
  CacheStats total_;
  std::vector<std::string> notes_;
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
