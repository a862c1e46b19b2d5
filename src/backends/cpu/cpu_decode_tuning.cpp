#include "backends/cpu/cpu_decode_tuning.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/kv_format.h"
#include "backends/decode.h"
#include "util/build_info.h"
#include "util/user_cache.h"

namespace mha::cpu {

namespace {

constexpr const char* kKind = "decode_calibration";
// A candidate replaces the best so far only when it beats the best by this
// much in every pair of passes timed alternately with it: on a shared host
// a pass's time moves by several percent between neighbours (on the loaded
// 2-core Xeon of this work, the same tuning's bench rows by 1.5x and more), and
// a choice made on that noise would be stored for good.
constexpr double kMargin = 0.03;
constexpr double kBudgetS = 0.35;  // the search stops trying candidates past this (a loaded host's passes are slow)

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string kib(int64_t b) { return b % 1024 == 0 ? std::to_string(b / 1024) + "K" : std::to_string(b); }

// A cache of kCalibrationBytes in the session's format, split across the
// pool as a session splits one group's keys (two chunks per thread), and
// each thread's scratch. Its rows repeat 256 encoded rows of uniform values:
// the kernel's speed does not depend on the values, only on their being
// normal numbers.
class Synthetic {
 public:
  Synthetic(const DecodeShape& s, ThreadPool& pool) : s_(s), pool_(pool) {
    kb_ = kv_row_bytes(s.dt, s.dh), vb_ = kv_row_bytes(s.dt, s.dv);
    keys_ = std::max<int64_t>(256, kCalibrationBytes / (kb_ + vb_));
    k_.reset(new unsigned char[keys_ * kb_]);
    v_.reset(new unsigned char[keys_ * vb_]);
    const int64_t seed_rows = 256;
    std::vector<float> row(std::max(s.dh, s.dv));
    for (int64_t j = 0; j < seed_rows; ++j) {
      for (int64_t d = 0; d < s.dh; ++d) row[d] = synthetic_value(1, 2 * (j * s.dh + d));
      kv_encode_row(s.dt, row.data(), s.dh, k_.get() + j * kb_);
      for (int64_t d = 0; d < s.dv; ++d) row[d] = synthetic_value(1, 2 * (j * s.dv + d) + 1);
      kv_encode_row(s.dt, row.data(), s.dv, v_.get() + j * vb_);
    }
    // The copies on the pool's threads: the pages are touched where they are read.
    pool.parallel_for((keys_ + seed_rows - 1) / seed_rows, [&](int64_t b, int) {
      if (b == 0) return;
      const int64_t n = std::min(seed_rows, keys_ - b * seed_rows);
      std::memcpy(k_.get() + b * seed_rows * kb_, k_.get(), n * kb_);
      std::memcpy(v_.get() + b * seed_rows * vb_, v_.get(), n * vb_);
    });
    q_.resize(s.G * s.dh);
    for (size_t i = 0; i < q_.size(); ++i) q_[i] = synthetic_value(2, i);
    tasks_ = 2 * pool.size();
    step_ = (keys_ + tasks_ - 1) / tasks_;
    scratch_.resize(pool.size());
    for (auto& x : scratch_) x.resize(s.G * (step_ + s.dv + 2));
  }

  // Seconds for one pass over the whole cache with tuning t.
  double pass(DecodeKernel k, const DecodeTuning& t) {
    const double t0 = now_s();
    pool_.parallel_for(tasks_, [&](int64_t i, int thread) {
      float* w = scratch_[thread].data();
      DecodeChunk c;
      c.q = q_.data(), c.k = k_.get(), c.v = v_.get(), c.dt = s_.dt, c.kbytes = kb_, c.vbytes = vb_;
      c.j0 = std::min(keys_, i * step_), c.j1 = std::min(keys_, c.j0 + step_);
      if (c.j1 <= c.j0) return;
      c.G = s_.G, c.dh = s_.dh, c.dv = s_.dv, c.scale_log2 = 0.125f;
      c.s = w, c.o = w + s_.G * step_, c.m = c.o + s_.G * s_.dv, c.l = c.m + s_.G;
      c.tune = t;
      k(c);
    });
    return now_s() - t0;
  }

 private:
  DecodeShape s_;
  ThreadPool& pool_;
  int64_t kb_ = 0, vb_ = 0, keys_ = 0, tasks_ = 0, step_ = 0;
  std::unique_ptr<unsigned char[]> k_, v_;
  std::vector<float> q_;
  std::vector<std::vector<float>> scratch_;
};

// Each tunable's values to try besides the current one. The strips and
// score batches only where the kernel takes them (the one-element formats;
// score batches on AVX2), and no strip wider than the ISA's registers hold
// (AVX2: 4 x 3 accumulators of 16 registers).
std::vector<DecodeTuning> neighbours(const DecodeTuning& t, DecodeKernel k, CacheDtype dt, int field) {
  const bool one = dt == CacheDtype::Float32 || dt == CacheDtype::Float16 || dt == CacheDtype::Bfloat16;
  const bool avx2 = k == decode_chunk_avx2;
  std::vector<DecodeTuning> out;
  auto add = [&](auto member, std::initializer_list<int64_t> values) {
    for (int64_t v : values) {
      DecodeTuning c = t;
      c.*member = static_cast<std::remove_reference_t<decltype(c.*member)>>(v);
      if (c != t) out.push_back(c);
    }
  };
  switch (field) {
    case 0: add(&DecodeTuning::prefetch, {2048, 4096, 16384, 32768}); break;
    case 1: add(&DecodeTuning::v_pace, {4096, 8192, 32768, 65536}); break;
    case 2: add(&DecodeTuning::v_block, {16, 64}); break;
    case 3: if (one) add(&DecodeTuning::v_strip, avx2 ? std::initializer_list<int64_t>{2} : std::initializer_list<int64_t>{2, 3}); break;
    case 4: if (one && avx2) add(&DecodeTuning::score_keys, {2}); break;
  }
  return out;
}

// a against b, alternately, `pairs` times: each one's passes.
std::pair<std::vector<double>, std::vector<double>> duel(Synthetic& syn, DecodeKernel k, const DecodeTuning& a,
                                                         const DecodeTuning& b, int pairs) {
  std::vector<double> ta, tb;
  for (int i = 0; i < pairs; ++i) ta.push_back(syn.pass(k, a)), tb.push_back(syn.pass(k, b));
  return {ta, tb};
}

// Whether a beat b by the margin in every pair.
bool wins(const std::vector<double>& ta, const std::vector<double>& tb) {
  for (size_t i = 0; i < ta.size(); ++i)
    if (ta[i] >= (1 - kMargin) * tb[i]) return false;
  return !ta.empty();
}

}  // namespace

const std::vector<std::pair<const char*, DecodeTuningMode>>& field_choices(DecodeTuningMode*) {
  static const std::vector<std::pair<const char*, DecodeTuningMode>> c = {
      {"auto", DecodeTuningMode::Auto}, {"defaults", DecodeTuningMode::Defaults}, {"fresh", DecodeTuningMode::Fresh}};
  return c;
}

const char* decode_tuning_mode_name(DecodeTuningMode m) {
  for (const auto& [n, v] : field_choices(static_cast<DecodeTuningMode*>(nullptr)))
    if (v == m) return n;
  return "auto";
}

nlohmann::json DecodeCalibration::json() const {
  nlohmann::json j = decode_tuning_json(tune);
  j["source"] = source;
  j["text"] = text();
  j["key"] = key;
  if (!why.empty()) j["why"] = why;
  if (default_ms > 0) j["default_ms"] = default_ms, j["tuned_ms"] = tuned_ms;
  if (seconds > 0) j["calibration_s"] = seconds;
  return j;
}

std::string DecodeCalibration::text() const {
  return "pf " + kib(tune.prefetch) + " pace " + kib(tune.v_pace) + " vb " + std::to_string(tune.v_block) +
         " strip " + std::to_string(tune.v_strip) + " keys " + std::to_string(tune.score_keys);
}

std::string decode_calibration_key(DecodeKernel k, const DecodeShape& s, int threads) {
  return machine_key(decode_kernel_isa(k), threads) + ";cache=" + cache_dtype_name(s.dt) + ";G" +
         std::to_string(s.G) + " dh" + std::to_string(s.dh) + " dv" + std::to_string(s.dv);
}

nlohmann::json decode_tuning_json(const DecodeTuning& t) {
  return {{"prefetch", t.prefetch},
          {"v_pace", t.v_pace},
          {"v_block", t.v_block},
          {"v_strip", t.v_strip},
          {"score_keys", t.score_keys}};
}

bool decode_tuning_valid(const DecodeTuning& t) {
  return t.prefetch >= 0 && t.prefetch <= (int64_t{1} << 24) && t.v_pace >= 0 && t.v_pace <= (int64_t{1} << 24) &&
         t.v_block >= 1 && t.v_block <= 4096 && (t.v_strip == 0 || (t.v_strip >= 2 && t.v_strip <= 4)) &&
         (t.score_keys == 0 || t.score_keys == 2 || t.score_keys == 3 || t.score_keys == 4);
}

std::optional<DecodeTuning> decode_tuning_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto field = [&](const char* name, auto& out) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_integer()) return false;
    out = it->get<std::remove_reference_t<decltype(out)>>();
    return true;
  };
  DecodeTuning t;
  if (!field("prefetch", t.prefetch) || !field("v_pace", t.v_pace) || !field("v_block", t.v_block) ||
      !field("v_strip", t.v_strip) || !field("score_keys", t.score_keys) || !decode_tuning_valid(t))
    return std::nullopt;
  return t;
}

DecodeCalibration calibrate_decode(DecodeKernel k, const DecodeShape& s, ThreadPool& pool) {
  const double start = now_s();
  Synthetic syn(s, pool);
  const DecodeTuning def = decode_tuning_defaults(k, s.dt);
  syn.pass(k, def);  // warm: page faults, frequency
  DecodeTuning best = def;
  for (int field = 0; field < 5 && now_s() - start < kBudgetS; ++field)
    for (const DecodeTuning& c : neighbours(best, k, s.dt, field)) {
      if (now_s() - start >= kBudgetS) break;
      const auto [tc, tb] = duel(syn, k, c, best, 2);
      if (wins(tc, tb)) best = c;
    }
  DecodeCalibration r;
  r.tune = def;
  r.source = "calibrated";
  r.key = decode_calibration_key(k, s, pool.size());
  if (best != def) {
    // The winner against the defaults once more: kept only if it still wins.
    const auto [tt, td] = duel(syn, k, best, def, 3);
    r.tuned_ms = 1e3 * median(tt), r.default_ms = 1e3 * median(td);
    if (wins(tt, td)) r.tune = best;
    else r.tuned_ms = r.default_ms;
  } else {
    std::vector<double> td;
    for (int i = 0; i < 3; ++i) td.push_back(syn.pass(k, def));
    r.tuned_ms = r.default_ms = 1e3 * median(td);
  }
  r.seconds = now_s() - start;
  return r;
}

DecodeCalibration DecodeTuner::tuning_for(DecodeKernel k, const DecodeShape& s, ThreadPool& pool, int64_t cache_bytes) {
  // Auto's choices are shared by every backend of the process (one read of
  // the store per shape); fresh ones are this tuner's own.
  static std::mutex process_mu;
  static std::map<std::string, DecodeCalibration> process;
  const std::string key = decode_calibration_key(k, s, pool.size());
  DecodeCalibration r;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = chosen_.find(key); it != chosen_.end() && mode_ == DecodeTuningMode::Fresh) {
    last_ = key;
    return it->second;
  }
  if (mode_ == DecodeTuningMode::Defaults || (mode_ == DecodeTuningMode::Auto && cache_bytes < kCalibrationBytes)) {
    r.tune = decode_tuning_defaults(k, s.dt), r.source = "defaults", r.key = key;
    r.why = mode_ == DecodeTuningMode::Defaults ? "decode_tuning=defaults"
                                                : "a cache below " + std::to_string(kCalibrationBytes >> 20) + " MiB";
  } else {
    std::lock_guard<std::mutex> plock(process_mu);
    auto it = process.find(key);
    if (mode_ == DecodeTuningMode::Auto && it != process.end()) {
      r = it->second;
    } else if (auto stored = mode_ == DecodeTuningMode::Auto ? user_cache_get(kKind, key) : std::nullopt;
               stored && decode_tuning_from_json(*stored)) {
      r.tune = *decode_tuning_from_json(*stored), r.source = "stored", r.key = key;
      r.default_ms = stored->value("default_ms", 0.0), r.tuned_ms = stored->value("tuned_ms", 0.0);
    } else {
      r = calibrate_decode(k, s, pool);
      nlohmann::json j = r.json();
      j.erase("source"), j.erase("key"), j.erase("text");
      user_cache_put(kKind, key, j);
    }
    process[key] = r;
  }
  chosen_[key] = r;
  last_ = key;
  return r;
}

nlohmann::json DecodeTuner::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json j = {{"mode", decode_tuning_mode_name(mode_)}};
  if (auto it = chosen_.find(last_); it != chosen_.end()) j["last"] = it->second.json();
  nlohmann::json all = nlohmann::json::array();
  for (const auto& [key, c] : chosen_) all.push_back(c.json());
  j["choices"] = all;
  return j;
}

}  // namespace mha::cpu
