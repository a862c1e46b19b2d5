#pragma once
// The decode kernel's tunables chosen per machine. Prefetch distances,
// strip widths and block lengths tuned on one microarchitecture fall short
// on another (issue 31: an EPYC Zen 4 at 53-76 % of its probed bandwidth
// with Zen 5's constants), and none of them changes an output bit
// (DecodeTuning, cpu_decode_kernel.h), so each machine may time its own:
//
//   - on a session's first one-row append (the decode kernel's first use),
//     a short search (at most ~0.5 s) from the defaults times the kernel on a
//     synthetic cache of the session's format and head shape, sized well
//     past the L2 (kCalibrationBytes), and keeps a value only where it beats
//     the one before by more than the margin, then holds the result against
//     the defaults once more, interleaved;
//   - the choice is stored in the user cache (util/user_cache.h, kind
//     "decode_calibration") keyed by CPU model, kernel ISA, thread count,
//     build, cache format and head shape, and later runs reuse it;
//   - caches smaller than kCalibrationBytes keep the defaults uncalibrated:
//     the tunables pace memory streams, and such a cache stays in the
//     caches (so tests, with their small caches, never calibrate).
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_decode_kernel.h"
#include "util/thread_pool.h"

namespace mha::cpu {

// The cpu backend's "decode_tuning" option: auto (stored, else calibrate
// and store), defaults (the constants, no calibration), fresh (calibrate
// again, once per backend and shape, and store).
enum class DecodeTuningMode { Auto, Defaults, Fresh };
// The cpu backend option's names for the modes (util/fields.h).
const std::vector<std::pair<const char*, DecodeTuningMode>>& field_choices(DecodeTuningMode*);
const char* decode_tuning_mode_name(DecodeTuningMode m);

// The shape a session decodes (what its calibration times).
struct DecodeShape {
  CacheDtype dt = CacheDtype::Float32;
  int64_t G = 1, dh = 1, dv = 1;
};

constexpr int64_t kCalibrationBytes = int64_t{24} << 20;  // the synthetic cache's K + V: 3x a 2-core L2

struct DecodeCalibration {
  DecodeTuning tune;              // every field resolved (no zeros)
  std::string source;             // "defaults", "stored" or "calibrated"
  std::string key;                // the store key
  std::string why;                // defaults: why (the mode, or a cache too small to calibrate for)
  double default_ms = 0, tuned_ms = 0;  // one pass over the synthetic cache (medians), 0: not timed
  double seconds = 0;             // the calibration's own run time
  nlohmann::json json() const;    // values and timings, as stored and reported
  std::string text() const;       // compact: "pf 8K pace 16K vb 32 strip 4 keys 4"
};

// The store key: CPU model, ISA, threads, build, format, head shape.
std::string decode_calibration_key(DecodeKernel k, const DecodeShape& s, int threads);
// DecodeTuning <-> its JSON fields; nothing for a missing field or a value
// the kernel does not take (a garbled store entry is recalibrated).
nlohmann::json decode_tuning_json(const DecodeTuning& t);
std::optional<DecodeTuning> decode_tuning_from_json(const nlohmann::json& j);
// Whether the kernel takes t (v_block >= 1, distances >= 0, strip 0 or 2-4,
// score keys 0, 2 or 3).
bool decode_tuning_valid(const DecodeTuning& t);

// The search itself: times kernel k for shape s on pool and returns the
// fastest tuning found (source "calibrated"). Timing-dependent by nature;
// any result gives the same output bits.
DecodeCalibration calibrate_decode(DecodeKernel k, const DecodeShape& s, ThreadPool& pool);

// One backend's choices: the tuning each of its sessions runs, by mode,
// and what was chosen (for the backend's describe()).
class DecodeTuner {
 public:
  explicit DecodeTuner(DecodeTuningMode mode = DecodeTuningMode::Auto) : mode_(mode) {}
  DecodeTuningMode mode() const { return mode_; }
  // The tuning for a session of shape s whose whole cache is cache_bytes.
  DecodeCalibration tuning_for(DecodeKernel k, const DecodeShape& s, ThreadPool& pool, int64_t cache_bytes);
  // {"mode": ..., "last": the latest choice's json(), "choices": every key's}
  nlohmann::json describe() const;

 private:
  DecodeTuningMode mode_;
  mutable std::mutex mu_;
  std::map<std::string, DecodeCalibration> chosen_;
  std::string last_;
};

}  // namespace mha::cpu
