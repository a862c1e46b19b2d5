// The decode-time ops: ttnn.transformer.scaled_dot_product_attention_decode
// (and the paged variant), ttnn.update_cache / experimental.paged_update_cache,
// ttnn.fill_cache and ttnn.experimental.rotary_embedding_llama. The numerics
// are src/ttsim/sdpa_decode.h, kv_cache.h and rotary_llama.h; these
// descriptors map TT-NN's arguments (params: positions, page tables, program
// config) onto them.
#include <cmath>
#include <string>
#include <vector>

#include "backends/ttsim/op_table.h"
#include "ttsim/kv_cache.h"
#include "ttsim/rotary_llama.h"
#include "ttsim/sdpa_decode.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

void require_4d(const OpCheck& c, const char* op) {
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].ndim() != 4)
      throw InputError(c.names[i] + ": " + op + " takes 4-D operands, found shape " + shape_str(c.inputs[i].shape()));
}

// v, a non-empty array of integers >= lo, or InputError "op options.KEY:
// expected WHAT, found ..." naming the bad element (the whole array when
// `show_array`).
std::vector<int64_t> int_array(const nlohmann::ordered_json& v, int64_t lo, const char* key, const std::string& what,
                               bool show_array) {
  auto bad = [&](const nlohmann::ordered_json& x) {
    const std::string found = show_array ? v.dump() : x.dump().substr(0, 80);
    return InputError(std::string("op options.") + key + ": expected " + what + ", found " + found);
  };
  if (!v.is_array() || v.empty()) throw bad(v);
  std::vector<int64_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < lo) throw bad(x);
    out.push_back(x.get<int64_t>());
  }
  return out;
}

// cur_pos: a JSON array of integers >= -1 (-1 only where `skip_ok`).
std::vector<int64_t> positions(const nlohmann::ordered_json& p, bool skip_ok) {
  if (!p.contains("cur_pos")) return {};
  return int_array(p["cur_pos"], skip_ok ? -1 : 0, "cur_pos",
                   std::string("an array of positions (integers >= ") + (skip_ok ? "-1" : "0") + ")", true);
}

// page_table: [b][blocks] of block ids, or none.
std::optional<std::vector<std::vector<int64_t>>> page_table(const nlohmann::ordered_json& p) {
  if (!p.contains("page_table")) return std::nullopt;
  const auto& v = p["page_table"];
  const char* what = "[b][blocks] non-negative integers (rows of equal length)";
  if (!v.is_array() || v.empty())
    throw InputError(std::string("op options.page_table: expected ") + what + ", found " + v.dump().substr(0, 80));
  std::vector<std::vector<int64_t>> pt;
  for (const auto& row : v) {
    pt.push_back(int_array(row, 0, "page_table", what, false));
    if (pt.back().size() != pt.front().size())
      throw InputError(std::string("op options.page_table: expected ") + what + ", found " + row.dump().substr(0, 80));
  }
  return pt;
}

// --- sdpa-decode ------------------------------------------------------------

// The op's own keys (the program config's k_chunk_size and
// exp_approx_mode, max_cores_per_head_batch, scale, sliding_window_size,
// attention_sink), checked, over TT-NN's defaults; check and run both read
// them here.
SdpaDecodeConfig decode_params(const nlohmann::ordered_json& p) {
  SdpaDecodeConfig cfg;
  cfg.k_chunk_size = param_int(p, "k_chunk_size", 0);
  const int64_t k = cfg.k_chunk_size;
  if (k < 0 || (k > 0 && (k % 32 != 0 || (k & (k - 1)) != 0)))
    throw InputError("op options.k_chunk_size: expected 0 (TT-NN's default) or a power of 2 that is a multiple of 32, "
                     "found " + std::to_string(k));
  cfg.exp_approx_mode = param_bool(p, "exp_approx_mode", true);
  const int64_t cores = param_int(p, "max_cores_per_head_batch", 0);
  if (p.contains("max_cores_per_head_batch") && cores < 1)
    throw InputError("op options.max_cores_per_head_batch: expected a positive integer");
  cfg.max_cores_per_head_batch = static_cast<int>(cores);
  cfg.sliding_window_size = param_int(p, "sliding_window_size", 0);
  if (cfg.sliding_window_size < 0)
    throw InputError("op options.sliding_window_size: expected 0 (none) or a positive number of positions, found " +
                     std::to_string(cfg.sliding_window_size));
  cfg.attention_sink = param_bf16_values(p, "attention_sink", "one per q head");
  if (const auto s = param_number(p, "scale")) {
    if (!(*s > 0 && std::isfinite(*s)))
      throw InputError("op options.scale: expected a positive number, found " + std::to_string(*s));
    cfg.scale = static_cast<float>(*s);
  }
  return cfg;
}

void check_sdpa_decode(const OpCheck& c) {
  require_4d(c, "sdpa-decode");
  if (positions(c.params, false).empty())
    throw InputError("sdpa-decode: --cur-pos P,... (the cur_pos param) is required: one position per user");
  page_table(c.params);
  decode_params(c.params);
}

TileTensor run_sdpa_decode(OpCall& c) {
  SdpaDecodeConfig cfg = decode_params(c.params);
  cfg.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi2);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  cfg.arch = c.opt.device.arch;
  cfg.grid_y = c.opt.grid_y.value_or(c.opt.device.grid_y);
  cfg.grid_x = c.opt.grid_x.value_or(c.opt.device.grid_x);
  cfg.output = c.out_format;
  const std::vector<int64_t> pos = positions(c.params, false);
  const auto pt = page_table(c.params);
  const std::string program = pt ? "ttnn.transformer.paged_scaled_dot_product_attention_decode"
                                  : "ttnn.transformer.scaled_dot_product_attention_decode";
  TtDevice::OpTimer timer(c.dev, program);
  c.dev.program(program,
                std::string(fidelity_name(cfg.math_fidelity)) + ",k_chunk=" + std::to_string(cfg.k_chunk_size) +
                    ",window=" + std::to_string(cfg.sliding_window_size) +
                    ",sink=" + (cfg.attention_sink.empty() ? "0" : "1"),
                {&c.in[0], &c.in[1], &c.in[2]});
  TileTensor out = tt_sdpa_decode(c.in[0], c.in[1], c.in[2], pos, pt ? &*pt : nullptr, cfg, c.dev.exec());
  const int64_t S = pt ? c.in[1].shape[2] * static_cast<int64_t>((*pt)[0].size()) : c.in[1].shape[2];
  const SdpaDecodeGrid g = sdpa_decode_grid(cfg, c.in[0].shape[1], c.in[1].shape[1]);
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"math_approx_mode", cfg.math_approx_mode},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  c.info["program_config"] = {{"compute_with_storage_grid_size", {cfg.grid_x, cfg.grid_y}},
                              {"k_chunk_size", sdpa_decode_k_chunk_size(cfg, S, pt.has_value(), pos[0])},
                              {"exp_approx_mode", cfg.exp_approx_mode},
                              {"cores_per_head", g.cores_per_head}};
  c.info["sliding_window_size"] = cfg.sliding_window_size;
  if (!cfg.attention_sink.empty()) c.info["attention_sink_bf16"] = cfg.attention_sink;
  return out;
}

// --- update-cache / fill-cache -----------------------------------------------

void check_update_cache(const OpCheck& c) {
  require_4d(c, "update-cache");
  const bool idx = c.params.contains("update_idx"), pos = c.params.contains("cur_pos");
  if (idx == pos)
    throw InputError("update-cache: give --update-idx N (ttnn.update_cache) or --cur-pos P,... (paged_update_cache), "
                     "exactly one");
  if (idx && (c.params.contains("page_table")))
    throw InputError("update-cache: --page-table goes with --cur-pos (paged_update_cache), not --update-idx");
  if (pos && c.params.contains("batch_offset"))
    throw InputError("update-cache: --batch-offset goes with --update-idx (ttnn.update_cache), not --cur-pos");
  positions(c.params, true);
  page_table(c.params);
}

TileTensor run_update_cache(OpCall& c) {
  const CacheWriteConfig cfg{c.opt.fp32_dest_acc_en.value_or(false), c.opt.bfp8_pack_precise.value_or(false)};
  if (c.out_format != c.in[0].format)
    throw InputError("update-cache: the output is the cache, in its dtype; --output-dtype does not apply");
  TileTensor cache = c.in[0];
  TtDevice::OpTimer timer(c.dev, c.program);
  if (c.params.contains("update_idx")) {
    tt_update_cache(cache, c.in[1], param_int(c.params, "update_idx", 0), param_int(c.params, "batch_offset", 0), cfg);
  } else {
    const auto pt = page_table(c.params);
    tt_paged_update_cache(cache, c.in[1], positions(c.params, true), pt ? &*pt : nullptr, cfg);
  }
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  return cache;
}

void check_fill_cache(const OpCheck& c) {
  require_4d(c, "fill-cache");
  if (!c.params.contains("batch_idx")) throw InputError("fill-cache: --batch-idx N (the batch_idx param) is required");
}

TileTensor run_fill_cache(OpCall& c) {
  if (c.out_format != c.in[0].format)
    throw InputError("fill-cache: the output is the cache, in its dtype; --output-dtype does not apply");
  TileTensor cache = c.in[0];
  TtDevice::OpTimer timer(c.dev, c.program);
  tt_fill_cache(cache, c.in[1], param_int(c.params, "batch_idx", 0), param_int(c.params, "update_idx", 0),
                CacheWriteConfig{});
  return cache;
}

// --- rotary-llama ---------------------------------------------------------------

void check_rotary(const OpCheck& c) {
  require_4d(c, "rotary-llama");
  (void)param_bool(c.params, "is_decode_mode", false);
}

TileTensor run_rotary(OpCall& c) {
  ComputeConfig cfg;
  cfg.math_fidelity = c.opt.math_fidelity.value_or(MathFidelity::HiFi4);
  cfg.math_approx_mode = c.opt.math_approx_mode.value_or(true);
  cfg.fp32_dest_acc_en = c.opt.fp32_dest_acc_en.value_or(false);
  cfg.arch = c.opt.device.arch;
  cfg.bfp8_pack_precise = c.opt.bfp8_pack_precise.value_or(false);
  cfg.output = c.out_format;
  const bool decode = param_bool(c.params, "is_decode_mode", false);
  const TileTensor trans = c.in.size() == 4 ? c.in[3] : rotary_llama_trans_mat(c.in[0].format);
  TtDevice::OpTimer timer(c.dev, c.program);
  TileTensor out = tt_rotary_llama(c.in[0], c.in[1], c.in[2], trans, decode ? RotaryMode::Decode : RotaryMode::Prefill,
                                   cfg, c.dev.exec());
  c.info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"fp32_dest_acc_en", cfg.fp32_dest_acc_en}};
  c.info["trans_mat"] = c.in.size() == 4 ? "input" : "built as get_rot_transformation_mat builds it";
  return out;
}

}  // namespace

extern const TtOpDesc kOpSdpaDecode = {
    "sdpa-decode", "Q K V",
    "ttnn.transformer.scaled_dot_product_attention_decode (Flash-Decode): Q [1, b, nh, dh], K/V caches "
    "[b, nkv, S, dh] (paged: [blocks, nkv, block_size, dh] with --page-table), attention over 0..cur_pos per user; "
    "K/V chunks dealt to the grid's cores, partials merged on the reduction tree",
    "HiFi2, approx on, fp32 Dst off, exp_approx_mode on, k_chunk_size = largest power of 2 dividing S up to 512 "
    "(paged: dynamic), scale 1/sqrt(dh), the device's grid",
    3, 3, false, false,
    {{"cur_pos", "one position per user (--cur-pos P,...), required"},
     {"page_table", "the paged variant's [b][blocks] block ids (--page-table FILE)"},
     {"k_chunk_size", "0 (default) or a power of 2, multiple of 32"},
     {"exp_approx_mode", "true (default) or false: the statistics' exp"},
     {"max_cores_per_head_batch", "cores per head at most (default: the grid)"},
     {"scale", "the softmax scale (default 1/sqrt(dh))"},
     {"sliding_window_size", "positions per user's window, [cur_pos-W+1, cur_pos] (default 0: none)"},
     {"attention_sink", "[s0, s1, ...]: one logit per q head, unscaled, held as bf16 (default none)"}},
    check_sdpa_decode, nullptr, run_sdpa_decode};

extern const TtOpDesc kOpUpdateCache = {
    "update-cache", "CACHE X",
    "ttnn.update_cache (--update-idx N [--batch-offset B], X [1, nkv, users, dh]) or "
    "ttnn.experimental.paged_update_cache (--cur-pos P,... [--page-table FILE], X [1, b, nh, dh]): the row written "
    "through the packer in the cache's dtype, its 32-row tile re-packed; writes the updated cache",
    "fp32 Dst off", 2, 2, false, false,
    {{"update_idx", "ttnn.update_cache's position (--update-idx)"},
     {"batch_offset", "ttnn.update_cache's first user (--batch-offset)"},
     {"cur_pos", "paged_update_cache's positions, -1 skips a user (--cur-pos)"},
     {"page_table", "paged_update_cache's [b][blocks] block ids (--page-table FILE)"}},
    check_update_cache, nullptr, run_update_cache};

extern const TtOpDesc kOpFillCache = {
    "fill-cache", "CACHE X",
    "ttnn.fill_cache: X [1, nkv, s, dh] copied tile by tile into user batch_idx's rows update_idx.. of CACHE "
    "[b, nkv, S, dh] "
    "(same dtype); writes the updated cache",
    "a tile copy (no compute config)", 2, 2, false, false,
    {{"batch_idx", "the user (--batch-idx), required"},
     {"update_idx", "the first row, a multiple of 32 (--update-idx; default 0)"}},
    check_fill_cache, nullptr, run_fill_cache};

extern const TtOpDesc kOpRotaryLlama = {
    "rotary-llama", "X COS SIN [TRANS]",
    "ttnn.experimental.rotary_embedding_llama: X*COS + (X@TRANS)*SIN per 32-column tile; prefill X [b, nh, S, dh] "
    "with COS/SIN [1, 1, S, dh]; decode (is_decode_mode=true) X [1, b, nh, dh] with COS/SIN [1, b, 1, dh]; TRANS "
    "[1, 1, 32, 32], built as TT-NN's get_rot_transformation_mat when omitted",
    "HiFi4, fp32 Dst off", 3, 4, false, false,
    {{"is_decode_mode", "false (default, prefill) or true (decode)"}}, check_rotary, nullptr, run_rotary};

}  // namespace mha::ttsim
