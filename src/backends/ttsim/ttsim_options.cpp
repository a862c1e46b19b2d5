#include "backends/ttsim/ttsim_options.h"

#include "util/error.h"

namespace mha::ttsim {

namespace {

using ordered_json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& where, const std::string& expected, const ordered_json& found) {
  throw InputError(where + ": expected " + expected + ", found " + found.dump());
}

std::string string_value(const ordered_json& v, const std::string& where, const std::string& expected) {
  if (!v.is_string()) bad(where, expected, v);
  return v.get<std::string>();
}

bool bool_value(const ordered_json& v, const std::string& where) {
  if (!v.is_boolean()) bad(where, "true or false", v);
  return v.get<bool>();
}

}  // namespace

// Grids are the compute_with_storage_grid_size TT-NN reports; L1 is what the
// allocator can hand out per bank (Wormhole: 1464 KiB).
DeviceInfo device_info(const std::string& name, const std::string& where) {
  const int64_t KiB = 1024, GiB = 1024 * 1024 * 1024;
  if (name == "wormhole_b0") return {name, 8, 8, 1464 * KiB, 12 * GiB, 12};
  if (name == "grayskull") return {name, 9, 12, 1024 * KiB, 8 * GiB, 8};
  if (name == "blackhole") return {name, 10, 13, 1536 * KiB, 32 * GiB, 8, Arch::Blackhole};
  throw InputError(where + ": expected \"wormhole_b0\", \"grayskull\" or \"blackhole\", found \"" + name + "\"");
}

const char* memory_name(MemoryKind m) { return m == MemoryKind::L1 ? "L1" : "DRAM"; }

TtOptions parse_tt_options(const ordered_json& options, const std::string& json_path) {
  TtOptions o;
  o.device = device_info("wormhole_b0", json_path + ".device");
  if (options.is_null()) return o;
  if (!options.is_object()) bad(json_path, "an object", options);
  const std::string fmt_expected = "\"bfloat16\", \"bfloat8_b\", \"bfloat4_b\" or \"float32\"";
  // The device first: core_grid is checked against it.
  if (options.contains("device")) {
    const std::string w = json_path + ".device";
    o.device = device_info(string_value(options["device"], w, "a device name"), w);
  }
  for (const auto& [key, v] : options.items()) {
    const std::string w = json_path + "." + key;
    if (key == "name" || key == "device") continue;
    if (key == "dtype") {
      std::string s = string_value(v, w, fmt_expected);
      if (s != "bfloat16" && s != "bfloat8_b" && s != "bfloat4_b" && s != "float32") bad(w, fmt_expected, v);
      o.dtype = format_from_name(s);
    } else if (key == "math_fidelity") {
      std::string s = string_value(v, w, "\"LoFi\", \"HiFi2\", \"HiFi3\" or \"HiFi4\"");
      if (s != "LoFi" && s != "HiFi2" && s != "HiFi3" && s != "HiFi4")
        bad(w, "\"LoFi\", \"HiFi2\", \"HiFi3\" or \"HiFi4\"", v);
      o.math_fidelity = fidelity_from_name(s);
    } else if (key == "fp32_dest_acc_en") {
      o.fp32_dest_acc_en = bool_value(v, w);
    } else if (key == "math_approx_mode") {
      o.math_approx_mode = bool_value(v, w);
    } else if (key == "packer_l1_acc") {
      o.packer_l1_acc = bool_value(v, w);
    } else if (key == "bfp8_pack_precise") {
      o.bfp8_pack_precise = bool_value(v, w);
    } else if (key == "memory_config") {
      std::string s = string_value(v, w, "\"L1\" or \"DRAM\"");
      if (s == "L1") o.memory = MemoryKind::L1;
      else if (s == "DRAM") o.memory = MemoryKind::DRAM;
      else bad(w, "\"L1\" or \"DRAM\"", v);
    } else if (key == "core_grid") {
      const std::string expected = "[y, x] with 1 <= y <= " + std::to_string(o.device.grid_y) +
                                   " and 1 <= x <= " + std::to_string(o.device.grid_x) + " (" +
                                   o.device.name + ")";
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) bad(w, expected, v);
      int64_t y = v[0].get<int64_t>(), x = v[1].get<int64_t>();
      if (y < 1 || x < 1 || y > o.device.grid_y || x > o.device.grid_x) bad(w, expected, v);
      o.grid_y = static_cast<int>(y);
      o.grid_x = static_cast<int>(x);
    } else if (key == "numerics") {
      const std::string s = string_value(v, w, "\"exact\"");
      try {
        o.numerics = numerics_from_name(s);
      } catch (const InputError& e) {
        throw InputError(w + ": " + e.what());
      }
    } else if (key == "attention") {
      const std::string s = string_value(v, w, "\"sdpa\" or \"ops\"");
      if (s == "sdpa") o.attention = AttentionKernel::Sdpa;
      else if (s == "ops") o.attention = AttentionKernel::Ops;
      else bad(w, "\"sdpa\" or \"ops\"", v);
    } else if (key == "kv_cache_dtype") {
      const std::string s = string_value(v, w, "\"bfloat16\", \"bfloat8_b\" or \"bfloat4_b\"");
      if (s != "bfloat16" && s != "bfloat8_b" && s != "bfloat4_b") bad(w, "\"bfloat16\", \"bfloat8_b\" or \"bfloat4_b\"", v);
      o.kv_cache_dtype = format_from_name(s);
    } else if (key == "threads") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024) bad(w, "an integer from 1 to 1024", v);
      o.threads = static_cast<int>(v.get<int64_t>());
    } else if (key == "kernels") {
      o.isa = isa_from_name(string_value(v, w, "\"auto\", \"scalar\", \"avx2\" or \"avx512\""));
    } else {
      throw InputError(w + ": unknown tt-sim option (expected device, dtype, math_fidelity, fp32_dest_acc_en, "
                           "math_approx_mode, packer_l1_acc, bfp8_pack_precise, memory_config, core_grid, numerics, attention, kv_cache_dtype, "
                           "threads, kernels), found " +
                       v.dump());
    }
  }
  return o;
}

}  // namespace mha::ttsim
