#pragma once
// tt-sim's options, in TT-NN's vocabulary, from the config's backend object,
// and the table of devices it can emulate.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/attention.h"
#include "ttsim/exec.h"
#include "ttsim/formats.h"
#include "ttsim/matrix_unit.h"

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

// Unset fields mean "the op's TT-NN default" (which differs per pipeline).
struct TtOptions {
  DeviceInfo device;
  std::optional<DataFormat> dtype;
  std::optional<MathFidelity> math_fidelity;
  std::optional<bool> fp32_dest_acc_en, math_approx_mode;
  // TT-NN's packer_l1_acc: matmul partials summed by the packer in L1
  // (unset: TT-NN's default, on unless the output is float32).
  std::optional<bool> packer_l1_acc;
  // The packer's source format for block-float outputs (ttsim/packer.h).
  std::optional<bool> bfp8_pack_precise;
  std::optional<MemoryKind> memory;
  std::optional<int> grid_y, grid_x;  // core_grid [y, x]
  Numerics numerics = Numerics::Exact;
  // "attention": the spec's default (AttentionKernel) unless given; "sdpa"
  // where the spec cannot run as SDPA is refused, and "ops" for a spec with
  // a rotary embedding (the op-by-op pipelines have no rotary op).
  std::optional<AttentionKernel> attention;
  // The SDPA pipeline's KV cache (and SDPA's K/V) dtype; unset: bfloat8_b,
  // tt_transformers' KV_CACHE precision.
  std::optional<DataFormat> kv_cache_dtype;
  // Host execution only (never changes a result bit): worker threads (0:
  // one per hardware thread) and the lane kernels' instruction set.
  int threads = 0;
  simd::Isa isa = simd::best_isa();
};

// `options` is the backend object (its "name" key is skipped); errors name
// json_path + "." + key with the expected and the found value.
TtOptions parse_tt_options(const nlohmann::ordered_json& options, const std::string& json_path);

const char* memory_name(MemoryKind m);

}  // namespace mha::ttsim
