#include "backends/ttsim/ttsim_decode_ops.h"

#include <cmath>
#include <string>

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ttsim_options.h"
#include "ttsim/kv_cache.h"
#include "ttsim/rotary_llama.h"
#include "ttsim/sdpa_decode.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::ttsim {

namespace {

struct DecodeOpDef {
  DecodeOp op;
  const char* name;
  const char* operands;
  int min_inputs, max_inputs;
};

constexpr DecodeOpDef kDecodeOps[] = {
    {DecodeOp::SdpaDecode, "sdpa-decode", "Q K V [PAGE_TABLE]", 3, 4},
    {DecodeOp::UpdateCache, "update-cache", "CACHE X [PAGE_TABLE]", 2, 3},
    {DecodeOp::FillCache, "fill-cache", "CACHE X", 2, 2},
    {DecodeOp::RotaryLlama, "rotary-llama", "X COS SIN [TRANS]", 3, 4},
};

const DecodeOpDef& def(DecodeOp op) {
  for (const DecodeOpDef& d : kDecodeOps)
    if (d.op == op) return d;
  return kDecodeOps[0];
}

// The op's program config keys, taken out of the options object before the
// rest goes to the tt-sim backend parser (which refuses unknown keys).
struct ProgramKeys {
  std::optional<int64_t> k_chunk_size, max_cores_per_head_batch;
  std::optional<bool> exp_approx_mode, is_decode_mode;
  std::optional<double> scale;
};

int64_t int_key(const nlohmann::ordered_json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw InputError("op options." + key + ": expected an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], found " + v.dump());
  return v.get<int64_t>();
}

bool bool_key(const nlohmann::ordered_json& v, const std::string& key) {
  if (!v.is_boolean()) throw InputError("op options." + key + ": expected true or false, found " + v.dump());
  return v.get<bool>();
}

ProgramKeys take_program_keys(DecodeOp op, nlohmann::ordered_json& o) {
  ProgramKeys k;
  const bool sdpa = op == DecodeOp::SdpaDecode;
  auto take = [&](const char* key, bool applies, auto fn) {
    if (!o.contains(key)) return;
    if (!applies)
      throw InputError(std::string("op options.") + key + ": applies to " +
                       (std::string(key) == "is_decode_mode" ? "rotary-llama" : "sdpa-decode") + ", not " +
                       def(op).name);
    fn(o[key]);
    o.erase(key);
  };
  take("k_chunk_size", sdpa, [&](const nlohmann::ordered_json& v) { k.k_chunk_size = int_key(v, "k_chunk_size", 0, 1 << 20); });
  take("max_cores_per_head_batch", sdpa,
       [&](const nlohmann::ordered_json& v) { k.max_cores_per_head_batch = int_key(v, "max_cores_per_head_batch", 1, 1 << 16); });
  take("exp_approx_mode", sdpa, [&](const nlohmann::ordered_json& v) { k.exp_approx_mode = bool_key(v, "exp_approx_mode"); });
  take("scale", sdpa, [&](const nlohmann::ordered_json& v) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      throw InputError("op options.scale: expected a positive number, found " + v.dump());
    k.scale = v.get<double>();
  });
  take("is_decode_mode", op == DecodeOp::RotaryLlama, [&](const nlohmann::ordered_json& v) { k.is_decode_mode = bool_key(v, "is_decode_mode"); });
  return k;
}

std::vector<float> f32_values(const Tensor& t) {
  const std::vector<double> v = t.to_f64();
  return std::vector<float>(v.begin(), v.end());
}

// A page table file: [b, blocks] of non-negative integers.
std::vector<std::vector<int64_t>> page_table_of(const OpInput& in) {
  const Shape& s = in.tensor.shape();
  if (s.size() != 2)
    throw InputError(in.name + ": expected a page table [b, max_blocks_per_user], found shape " + shape_str(s));
  const std::vector<double> v = in.tensor.to_f64();
  std::vector<std::vector<int64_t>> pt(static_cast<size_t>(s[0]));
  for (int64_t u = 0; u < s[0]; ++u)
    for (int64_t j = 0; j < s[1]; ++j) {
      const double x = v[static_cast<size_t>(u * s[1] + j)];
      if (x < 0 || x != std::floor(x) || x > 1e9)
        throw InputError(in.name + ": page table entries must be block ids (non-negative integers), found " +
                         std::to_string(x) + " at [" + std::to_string(u) + ", " + std::to_string(j) + "]");
      pt[static_cast<size_t>(u)].push_back(static_cast<int64_t>(x));
    }
  return pt;
}

}  // namespace

std::optional<DecodeOp> decode_op_from_name(const std::string& name) {
  for (const DecodeOpDef& d : kDecodeOps)
    if (name == d.name) return d.op;
  return std::nullopt;
}
const char* decode_op_name(DecodeOp op) { return def(op).name; }
const char* decode_op_operands(DecodeOp op) { return def(op).operands; }

void check_decode_op_inputs(DecodeOp op, int n) {
  const DecodeOpDef& d = def(op);
  if (n < d.min_inputs || n > d.max_inputs)
    throw InputError(std::string(d.name) + ": expected inputs " + d.operands + ", found " + std::to_string(n) +
                     " input" + (n == 1 ? "" : "s"));
}

OpResult run_decode_op(const DecodeOpRequest& req) {
  const DecodeOpDef& d = def(req.op);
  const int n = static_cast<int>(req.inputs.size());
  check_decode_op_inputs(req.op, n);
  nlohmann::ordered_json opts = req.options;
  const ProgramKeys keys = take_program_keys(req.op, opts);
  const TtOptions o = parse_tt_options(opts, "op options");
  // Tensor operands (page tables are integer tables, not device tensors).
  const bool has_page_table = (req.op == DecodeOp::SdpaDecode && n == 4) || (req.op == DecodeOp::UpdateCache && n == 3);
  const int tensors = has_page_table ? n - 1 : n;
  for (int i = 0; i < n; ++i) {
    const OpInput& in = req.inputs[static_cast<size_t>(i)];
    if (in.tensor.ndim() == 0 || in.tensor.numel() == 0)
      throw InputError(in.name + ": expected a tensor with at least one element, found shape " +
                       shape_str(in.tensor.shape()));
    if (i < tensors && in.tensor.ndim() != 4)
      throw InputError(in.name + ": " + d.name + " expects 4-D operands (" + d.operands + "), found shape " +
                       shape_str(in.tensor.shape()));
  }
  std::vector<DataFormat> fmt;
  std::vector<TileTensor> t;
  for (int i = 0; i < tensors; ++i) {
    const OpInput& in = req.inputs[static_cast<size_t>(i)];
    fmt.push_back(in.dtype.value_or(o.dtype.value_or(DataFormat::Bfloat16)));
    const std::vector<float> v = f32_values(in.tensor);
    t.push_back(to_tile_layout(v.data(), in.tensor.shape(), fmt.back()));
  }
  std::vector<std::vector<int64_t>> page_table;
  if (has_page_table) page_table = page_table_of(req.inputs.back());

  TtDevice dev(o);
  dev.set_memory(o.memory.value_or(MemoryKind::DRAM));
  OpResult res;
  nlohmann::json& info = res.info;
  info["op"] = d.name;
  info["device"] = o.device.name;
  info["inputs"] = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    const OpInput& in = req.inputs[static_cast<size_t>(i)];
    info["inputs"].push_back({{"name", in.name},
                              {"shape", in.tensor.shape()},
                              {"file_dtype", dtype_name(in.tensor.dtype())},
                              {"dtype", i < tensors ? format_name(fmt[static_cast<size_t>(i)]) : "int32"},
                              {"layout", i < tensors ? "TILE" : "ROW_MAJOR"}});
  }
  const bool fp32 = o.fp32_dest_acc_en.value_or(false);
  const bool precise = o.bfp8_pack_precise.value_or(false);
  TileTensor out;
  switch (req.op) {
    case DecodeOp::SdpaDecode: {
      if (req.update_idx || req.batch_idx) throw InputError("sdpa-decode: takes --cur-pos, not --update-idx/--batch-idx");
      SdpaDecodeConfig c;
      c.k_chunk_size = keys.k_chunk_size.value_or(0);
      c.exp_approx_mode = keys.exp_approx_mode.value_or(true);
      c.math_fidelity = o.math_fidelity.value_or(MathFidelity::HiFi2);
      c.math_approx_mode = o.math_approx_mode.value_or(true);
      c.fp32_dest_acc_en = fp32;
      c.grid_y = o.grid_y.value_or(o.device.grid_y);
      c.grid_x = o.grid_x.value_or(o.device.grid_x);
      c.max_cores_per_head_batch = static_cast<int>(keys.max_cores_per_head_batch.value_or(0));
      if (keys.scale) c.scale = static_cast<float>(*keys.scale);
      c.output = req.output_dtype.value_or(fmt[0]);
      if (req.cur_pos.empty()) throw InputError("sdpa-decode: --cur-pos P,... is required (one position per user)");
      TtDevice::OpTimer timer(dev, "ttnn.transformer.scaled_dot_product_attention_decode");
      out = tt_sdpa_decode(t[0], t[1], t[2], req.cur_pos, has_page_table ? &page_table : nullptr, c, dev.exec());
      const int64_t S = has_page_table ? t[1].shape[2] * static_cast<int64_t>(page_table[0].size()) : t[1].shape[2];
      const SdpaDecodeGrid g = sdpa_decode_grid(c, t[0].shape[1], t[1].shape[1]);
      info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(c.math_fidelity)},
                                       {"math_approx_mode", c.math_approx_mode},
                                       {"fp32_dest_acc_en", c.fp32_dest_acc_en}};
      info["program_config"] = {{"compute_with_storage_grid_size", {c.grid_x, c.grid_y}},
                                {"k_chunk_size", sdpa_decode_k_chunk_size(c, S, has_page_table, req.cur_pos[0])},
                                {"exp_approx_mode", c.exp_approx_mode},
                                {"cores_per_head", g.cores_per_head}};
      info["cur_pos"] = req.cur_pos;
      break;
    }
    case DecodeOp::UpdateCache:
    case DecodeOp::FillCache: {
      CacheWriteConfig c{fp32, precise};
      if (req.output_dtype) throw InputError(std::string(d.name) + ": the output is the cache, in its dtype; --output-dtype does not apply");
      out = t[0];
      TtDevice::OpTimer timer(dev, std::string("ttnn.") + d.name);
      if (req.op == DecodeOp::FillCache) {
        if (!req.batch_idx) throw InputError("fill-cache: --batch-idx N is required");
        tt_fill_cache(out, t[1], *req.batch_idx, c);
      } else if (req.update_idx) {
        if (!req.cur_pos.empty() || has_page_table)
          throw InputError("update-cache: give either --update-idx (ttnn.update_cache) or --cur-pos with an optional "
                           "PAGE_TABLE (paged_update_cache), not both");
        tt_update_cache(out, t[1], *req.update_idx, req.batch_offset, c);
      } else if (!req.cur_pos.empty()) {
        tt_paged_update_cache(out, t[1], req.cur_pos, has_page_table ? &page_table : nullptr, c);
      } else {
        throw InputError("update-cache: --update-idx N (ttnn.update_cache) or --cur-pos P,... (paged_update_cache) is required");
      }
      info["compute_kernel_config"] = {{"fp32_dest_acc_en", fp32}};
      break;
    }
    case DecodeOp::RotaryLlama: {
      if (!req.cur_pos.empty() || req.update_idx || req.batch_idx)
        throw InputError("rotary-llama: --cur-pos, --update-idx and --batch-idx do not apply");
      ComputeConfig c;
      c.math_fidelity = o.math_fidelity.value_or(MathFidelity::HiFi4);
      c.math_approx_mode = o.math_approx_mode.value_or(true);
      c.fp32_dest_acc_en = fp32;
      c.bfp8_pack_precise = precise;
      c.output = req.output_dtype.value_or(fmt[0]);
      const TileTensor trans = n == 4 ? t[3] : rotary_llama_trans_mat(fmt[0]);
      // Decode mode when X is [1, b, nh, dh] with COS [1, b, ...]; an explicit is_decode_mode wins.
      const bool decode = keys.is_decode_mode.value_or(false);
      TtDevice::OpTimer timer(dev, "ttnn.experimental.rotary_embedding_llama");
      out = tt_rotary_llama(t[0], t[1], t[2], trans, decode ? RotaryMode::Decode : RotaryMode::Prefill, c, dev.exec());
      info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(c.math_fidelity)},
                                       {"fp32_dest_acc_en", c.fp32_dest_acc_en}};
      info["is_decode_mode"] = decode;
      info["trans_mat"] = n == 4 ? "input" : "built (get_rot_transformation_mat)";
      break;
    }
  }
  res.output = to_tensor(out);
  info["output"] = {{"shape", res.output.shape()}, {"dtype", format_name(out.format)}};
  info["memory_config"] = memory_name(dev.memory());
  info["program_cache"] = dev.per_op_json();
  return res;
}

}  // namespace mha::ttsim
