#include "backends/ttsim/ttsim_options.h"

#include "util/error.h"

namespace mha {

const std::vector<std::pair<const char*, AttentionKernel>>& field_choices(AttentionKernel*) {
  static const std::vector<std::pair<const char*, AttentionKernel>> c = {{"sdpa", AttentionKernel::Sdpa},
                                                                           {"ops", AttentionKernel::Ops}};
  return c;
}

}  // namespace mha

namespace mha::ttsim {

// Grids are the compute_with_storage_grid_size TT-NN reports; L1 is what the
// allocator can hand out per bank (Wormhole: 1464 KiB).
DeviceInfo device_info(const std::string& name, const std::string& where) {
  const int64_t KiB = 1024, GiB = 1024 * 1024 * 1024;
  if (name == "wormhole_b0") return {name, 8, 8, 1464 * KiB, 12 * GiB, 12};
  if (name == "grayskull") return {name, 9, 12, 1024 * KiB, 8 * GiB, 8};
  if (name == "blackhole") return {name, 10, 13, 1536 * KiB, 32 * GiB, 8, Arch::Blackhole};
  throw InputError(where + ": expected \"wormhole_b0\", \"grayskull\" or \"blackhole\", found \"" + name + "\"");
}

const std::vector<std::pair<const char*, MemoryKind>>& field_choices(MemoryKind*) {
  static const std::vector<std::pair<const char*, MemoryKind>> c = {{"L1", MemoryKind::L1}, {"DRAM", MemoryKind::DRAM}};
  return c;
}

const char* memory_name(MemoryKind m) { return m == MemoryKind::L1 ? "L1" : "DRAM"; }

TtOptions parse_tt_options(const nlohmann::ordered_json& options, const std::string& json_path) {
  TtOptions o;
  // Fields parse in declaration order: the device before core_grid, which
  // is checked against it.
  fields::parse_into(o, options, json_path, "tt-sim option", {"name"});
  // The lane kernels at that width (kernels_for picks within it); the
  // report names the table's own level.
  const vec::Isa isa = o.host.isa(json_path, /*scalar_ok=*/true);
  const simd::KernelTable* t = simd::kernels_for(isa);
  o.isa = t ? t->isa : simd::Isa::Scalar;
  return o;
}

std::string tt_options_help() {
  fields::HelpVisitor h;
  TtOptions().fields(h);
  std::string s;
  for (const auto& [key, help] : h.lines) s += "  " + key + ": " + help + "\n";
  return s;
}

}  // namespace mha::ttsim
