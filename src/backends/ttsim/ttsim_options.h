#pragma once
// tt-sim's options, in TT-NN's vocabulary, from the config's backend object,
// and the table of devices it can emulate. The options are one field list
// (TtOptions::fields, util/fields.h): the parser, its messages, the
// "expected one of" list of keys and the help come from it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/host_options.h"
#include "model/attention.h"
#include "ttsim/exec.h"
#include "ttsim/formats.h"
#include "ttsim/matrix_unit.h"
#include "util/fields.h"

namespace mha {
// {name, value} for util/fields.h: "sdpa", "ops".
const std::vector<std::pair<const char*, AttentionKernel>>& field_choices(AttentionKernel*);
}  // namespace mha

namespace mha::ttsim {

struct DeviceInfo {
  std::string name;
  int grid_y = 8, grid_x = 8;  // worker cores: one L1 bank each
  int64_t l1_bytes = 0;        // allocatable L1 per core
  int64_t dram_bytes = 0;
  int dram_banks = 12;
  // Whose arithmetic the ops emulate (ttsim/arch.h). Grayskull has no model
  // of its own and computes as Wormhole.
  Arch arch = Arch::Wormhole;
};

// wormhole_b0, grayskull, blackhole; throws InputError naming `where`.
DeviceInfo device_info(const std::string& name, const std::string& where);

enum class MemoryKind { L1, DRAM };
const std::vector<std::pair<const char*, MemoryKind>>& field_choices(MemoryKind*);

// A core grid [y, x]: TT-NN's core_grid / compute_with_storage_grid_size.
struct Grid {
  int y = 8, x = 8;
};

// Unset fields mean "the op's TT-NN default" (which differs per pipeline).
struct TtOptions {
  DeviceInfo device = device_info("wormhole_b0", "device");
  std::optional<DataFormat> dtype;
  std::optional<MathFidelity> math_fidelity;
  std::optional<bool> fp32_dest_acc_en, math_approx_mode;
  // TT-NN's packer_l1_acc: matmul partials summed by the packer in L1
  // (unset: TT-NN's default, on unless the output is float32).
  std::optional<bool> packer_l1_acc;
  // The packer's source format for block-float outputs (ttsim/packer.h).
  std::optional<bool> bfp8_pack_precise;
  std::optional<MemoryKind> memory;
  std::optional<Grid> core_grid;
  Numerics numerics = Numerics::Exact;
  // Whose program factories and kernels (ttsim/revision.h): "2024" or
  // "latest"; every op's compute config carries it (apply_device).
  TtMetal tt_metal = kDefaultTtMetal;
  // "attention": the spec's default (AttentionKernel) unless given; "sdpa"
  // where the spec cannot run as SDPA is refused, and "ops" for a spec with
  // a rotary embedding (the op-by-op pipelines have no rotary op).
  std::optional<AttentionKernel> attention;
  // The SDPA pipeline's KV cache (and SDPA's K/V) dtype; unset: bfloat8_b,
  // tt_transformers' KV_CACHE precision.
  std::optional<DataFormat> kv_cache_dtype;
  // Host execution only (never changes a result bit): worker threads (0:
  // one per hardware thread) and the lane kernels' instruction set.
  HostOptions host;
  simd::Isa isa = simd::best_isa();

  template <class V>
  void fields(V& v);
};

// `options` is the backend object (its "name" key is skipped); errors name
// json_path + "." + key with the expected and the found value.
TtOptions parse_tt_options(const nlohmann::ordered_json& options, const std::string& json_path);
// "  KEY: help" lines, one per option.
std::string tt_options_help();

const char* memory_name(MemoryKind m);

// What the options fix in every op's compute config: the device's Arch and
// the tt_metal profile (one place, so no op forgets one).
void apply_device(ComputeConfig& c, const TtOptions& o);
// {"profile": "2024", "commit": "..."}: what --json and the reports name.
nlohmann::json tt_metal_json(TtMetal t);

}  // namespace mha::ttsim

namespace mha::fields {

template <>
struct Codec<ttsim::DeviceInfo> {
  static std::string expected() { return "\"wormhole_b0\", \"grayskull\" or \"blackhole\""; }
  static std::string plural() { return "device names"; }
  static bool parse(const json& j, ttsim::DeviceInfo& v) {
    if (!j.is_string()) return false;
    const std::string n = j.get<std::string>();
    if (n != "wormhole_b0" && n != "grayskull" && n != "blackhole") return false;
    v = ttsim::device_info(n, "device");
    return true;
  }
  static json to_json(const ttsim::DeviceInfo& v) { return v.name; }
  static std::string text(const ttsim::DeviceInfo& v) { return v.name; }
};

template <>
struct Codec<ttsim::Grid> {
  static std::string expected() { return "[y, x]"; }
  static std::string plural() { return "grids"; }
  static bool parse(const json& j, ttsim::Grid& g) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer()) return false;
    const int64_t y = j[0].get<int64_t>(), x = j[1].get<int64_t>();
    if (y < 1 || x < 1 || y > 1024 || x > 1024) return false;
    g = {static_cast<int>(y), static_cast<int>(x)};
    return true;
  }
  static json to_json(const ttsim::Grid& g) { return json::array({g.y, g.x}); }
  static std::string text(const ttsim::Grid& g) { return std::to_string(g.y) + "x" + std::to_string(g.x); }
};

template <>
struct Codec<ttsim::simd::Isa> {
  static std::string expected() { return "\"auto\", \"scalar\", \"avx2\" or \"avx512\""; }
  static std::string plural() { return "instruction sets"; }
  static json to_json(ttsim::simd::Isa i) { return ttsim::simd::isa_name(i); }
  static std::string text(ttsim::simd::Isa i) { return ttsim::simd::isa_name(i); }
  static bool parse(const json&, ttsim::simd::Isa&) { return false; }  // set from HostOptions::kernels
};

}  // namespace mha::fields

namespace mha::ttsim {

template <class V>
void TtOptions::fields(V& v) {
  using fields::kNone;
  v("device", device, "the emulated device (default wormhole_b0)");
  v("dtype", dtype, "the inputs' and weights' dtype (default: each op's)");
  v("math_fidelity", math_fidelity, "every op's math_fidelity (default: each op's)");
  v("fp32_dest_acc_en", fp32_dest_acc_en, "every op's fp32 Dst (default: each op's)");
  v("math_approx_mode", math_approx_mode, "every op's approx mode (default: each op's)");
  v("packer_l1_acc", packer_l1_acc, "matmul K blocks summed in L1 (default: on unless the output is float32)");
  v("bfp8_pack_precise", bfp8_pack_precise, "the packer's source for block-float outputs (default false)");
  v("memory_config", memory, "where tensors live (default: each pipeline's)");
  v("core_grid", core_grid, "[y, x] within the device's grid (default: each op's)", kNone,
    [this](const fields::json& j, std::optional<Grid>& g, const std::string& where) {
      const std::string expected = "[y, x] with 1 <= y <= " + std::to_string(device.grid_y) + " and 1 <= x <= " +
                                   std::to_string(device.grid_x) + " (" + device.name + ")";
      Grid parsed;
      if (!fields::Codec<Grid>::parse(j, parsed) || parsed.y > device.grid_y || parsed.x > device.grid_x)
        throw InputError(where + ": expected " + expected + ", found " + j.dump());
      g = parsed;
    });
  // `--option tt_metal=2024` reaches here as the number 2024: taken as "2024".
  v("tt_metal", tt_metal,
    "whose kernels: \"latest\" (today's) or \"2024\" (SDPA at 0255f50, softmax's 1/ln2-seeded reciprocal)",
    kNone,
    [](const fields::json& j, TtMetal& t, const std::string& where) {
      const fields::json name = j.is_number_integer() && j.get<int64_t>() == 2024 ? fields::json("2024") : j;
      if (!fields::Codec<TtMetal>::parse(name, t))
        throw InputError(where + ": expected " + fields::Codec<TtMetal>::expected() + ", found " + j.dump());
    });
  v("numerics", numerics, "the numeric model: exact (default)", kNone,
    [](const fields::json& j, Numerics& n, const std::string& where) {
      if (!j.is_string()) throw InputError(where + ": expected \"exact\", found " + j.dump());
      try {
        n = numerics_from_name(j.get<std::string>());
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
      }
    });
  v("attention", attention, "\"sdpa\" or \"ops\" (default: the spec's)");
  v("kv_cache_dtype", kv_cache_dtype, "the SDPA path's KV cache dtype (default bfloat8_b)", kNone,
    [](const fields::json& j, std::optional<DataFormat>& f, const std::string& where) {
      DataFormat d{};
      if (!fields::Codec<DataFormat>::parse(j, d) || d == DataFormat::Float32)
        throw InputError(where + ": expected \"bfloat16\", \"bfloat8_b\" or \"bfloat4_b\", found " + j.dump());
      f = d;
    });
  host.fields(v);
  v("isa", isa, "the kernels' instruction set, from `kernels`", fields::kDerived);
}

}  // namespace mha::ttsim
