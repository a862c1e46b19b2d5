#include "backends/ttsim/ttsim_device.h"

#include <algorithm>
#include <thread>

#include "util/error.h"

namespace mha::ttsim {

TtDevice::TtDevice(TtOptions o) : opt_(std::move(o)) {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(opt_.host.threads > 0 ? opt_.host.threads : (hw > 0 ? hw : 1));
  exec_ = Exec{opt_.isa, pool_.get()};
}

int64_t tile_bytes(DataFormat f) {
  switch (f) {
    case DataFormat::Float32: return 4096;
    case DataFormat::Bfloat16: return 2048;
    case DataFormat::Bfp8_b: return 1024 + 64;
    case DataFormat::Bfp4_b: return 512 + 64;
  }
  return 2048;
}

int64_t tile_count(const Shape& shape) {
  int64_t n = static_cast<int64_t>(shape.size());
  int64_t rows = n >= 2 ? shape[n - 2] : 1, batch = 1;
  for (int64_t i = 0; i + 2 < n; ++i) batch *= shape[i];
  return batch * (pad_to_tile(rows) / kTile) * (pad_to_tile(shape[n - 1]) / kTile);
}

int64_t tile_count(const TileTensor& t) { return t.batch * (t.prows / kTile) * (t.pcols / kTile); }

void TtDevice::program(const std::string& op, const std::string& attrs, const std::vector<const TileTensor*>& inputs) {
  if (muted_) return;
  std::string key = op + "{" + attrs + "}";
  for (const TileTensor* t : inputs) {
    key += "(";
    for (int64_t d : t->shape) key += std::to_string(d) + ",";
    key += std::string(format_name(t->format)) + ",TILE," + memory_name(memory_) + ")";
  }
  CacheStats& s = per_op_[op];
  if (programs_[key]++ == 0) {
    ++s.misses;
    ++total_.misses;
  } else {
    ++s.hits;
    ++total_.hits;
  }
}

TtDevice::OpTimer::~OpTimer() {
  OpTime& t = d_.times_[op_];
  ++t.calls;
  t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  t.mac_phases += macs_;
}

std::vector<std::string> TtDevice::program_keys() const {
  std::vector<std::string> keys;
  for (const auto& [key, uses] : programs_) keys.push_back(key);
  return keys;
}

nlohmann::json TtDevice::per_op_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [op, s] : per_op_) j[op] = {{"hits", s.hits}, {"misses", s.misses}};
  for (const auto& [op, t] : times_) {
    nlohmann::json& o = j[op];
    o["calls"] = t.calls;
    o["host_ms"] = t.seconds * 1e3;
    if (t.mac_phases > 0) {
      o["emulated_mac_phases"] = t.mac_phases;
      o["ns_per_mac_phase_per_thread"] = t.seconds * 1e9 * exec_.threads() / t.mac_phases;
    }
  }
  return j;
}

int64_t TtDevice::banks() const {
  return memory_ == MemoryKind::L1 ? int64_t{opt_.device.grid_y} * opt_.device.grid_x : opt_.device.dram_banks;
}

// Interleaved buffers spread whole tiles (pages) round-robin over the banks.
int64_t TtDevice::bank_bytes(int64_t tiles, DataFormat f) const { return (tiles + banks() - 1) / banks() * tile_bytes(f); }

void TtDevice::set_resident(const std::vector<const TileTensor*>& tensors) {
  resident_per_bank_ = resident_total_ = 0;
  for (const TileTensor* t : tensors) {
    resident_per_bank_ += bank_bytes(tile_count(*t), t->format);
    resident_total_ += tile_count(*t) * tile_bytes(t->format);
  }
}

void TtDevice::check_memory(const std::string& op, const std::vector<const TileTensor*>& inputs, const Shape& out_shape,
                            DataFormat out_format) const {
  check_memory_cb(op, inputs, out_shape, out_format, 0);
}

void TtDevice::check_memory_cb(const std::string& op, const std::vector<const TileTensor*>& inputs,
                               const Shape& out_shape, DataFormat out_format, int64_t cb_bytes_per_core) const {
  if (muted_) return;  // a fused op's inner step allocates nothing of its own
  const int64_t out_tiles = tile_count(out_shape);
  const int64_t out_total = out_tiles * tile_bytes(out_format), out_bank = bank_bytes(out_tiles, out_format);
  int64_t per_bank = resident_per_bank_ + out_bank, total = resident_total_ + out_total;
  for (const TileTensor* t : inputs) {
    per_bank += bank_bytes(tile_count(*t), t->format);
    total += tile_count(*t) * tile_bytes(t->format);
  }
  const bool l1 = memory_ == MemoryKind::L1;
  if (l1) per_bank += cb_bytes_per_core;
  const int64_t capacity = l1 ? opt_.device.l1_bytes : opt_.device.dram_bytes / banks();
  if (per_bank <= capacity) return;
  const char* kind = l1 ? "L1" : "DRAM";
  throw DeviceOutOfMemory("Out of Memory: Not enough space to allocate " + std::to_string(out_total) + " B " + kind +
                          " buffer across " + std::to_string(banks()) + " banks, where each bank needs to store " +
                          std::to_string(out_bank) + " B (tt-sim: op " + op + " needs " + std::to_string(per_bank) +
                          " B per " + kind + " bank, " + std::to_string(total) + " B in all, of " +
                          std::to_string(capacity) + " B per bank on " + opt_.device.name + ")");
}

void TtDevice::note(const std::string& line) {
  if (std::find(notes_.begin(), notes_.end(), line) == notes_.end()) notes_.push_back(line);
}

}  // namespace mha::ttsim
