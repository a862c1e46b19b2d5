#include "backends/ttsim/ttsim_single_op.h"

#include <algorithm>
#include <cstring>

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ttsim_options.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// Ops that take --scalar, for the message on any other op.
std::string scalar_ops() {
  std::string s;
  for (const TtOpDesc* d : tt_ops())
    if (d->takes_scalar) s += std::string(s.empty() ? "" : ", ") + d->name;
  return s;
}

// host_quantize leaves the tiles as they are. to_tile_layout quantises each
// padded row (values, then zero padding) with it, so with zero padding this
// is exactly "converting the values gives these tiles". In blocks of whole
// face rows (rows are multiples of 32 values), through the host's own
// (vectorised) rounding.
bool host_exact(const TileTensor& t) {
  if (t.format == DataFormat::Float32) return true;  // host_quantize copies
  constexpr size_t kBlock = 1024;
  float buf[kBlock];
  const std::vector<float>& v = t.data;
  for (size_t i = 0; i < v.size(); i += kBlock) {
    const size_t n = std::min(kBlock, v.size() - i);
    host_quantize(v.data() + i, buf, static_cast<int64_t>(n), t.format);
    if (std::memcmp(buf, v.data() + i, n * sizeof(float)) != 0) return false;
  }
  return true;
}

void zero_padding(TileTensor& t) {
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.prows; ++r) {
      float* row = &t.at(b, r, 0);
      std::fill(row + (r < t.rows ? t.cols : 0), row + t.pcols, 0.0f);
    }
}

// The op's input tiles. A host input is converted as ttnn.from_torch
// converts it (dtype, TILE layout), into the buffers of this thread's
// previous op: a script's ops one after another (a decode step per cache
// depth and config) then reuse the pages a KV cache took once, where fresh
// ones cost the kernel's zeroing, more than the conversion itself
// (to_tile_layout releases a buffer twice the size needed). An input on the
// device is taken as is when converting its values would give the same tiles.
OpTiles input_tiles(const TtOpDesc& d, const OpRequest& req, const std::vector<OpOperand>& operands,
                    const std::vector<DataFormat>& fmt) {
  static thread_local std::vector<TileTensor> t;
  const size_t n = req.inputs.size();
  t.resize(n);
  std::vector<const TileTensor*> p(n);
  for (size_t i = 0; i < n; ++i) {
    const OpInput& in = req.inputs[i];
    const Shape s = d.device_shape ? d.device_shape(static_cast<int>(i), operands[i].dims) : operands[i].dims;
    if (in.tiles && in.tiles->tiles.format == fmt[i] && in.tiles->tiles.shape == s && in.tiles->as_host()) {
      p[i] = &in.tiles->tiles;
      continue;
    }
    // float32 values are read in place (a KV cache is most of an op's host
    // work); other dtypes, and tiles, are converted to float32 first.
    std::vector<float> v;
    const float* src = in.tiles                          ? (v = to_row_major(in.tiles->tiles)).data()
                       : in.tensor.dtype() == DType::F32 ? in.tensor.data<float>()
                                                         : (v = in.tensor.to_f32()).data();
    to_tile_layout(src, s, fmt[i], t[i]);
    p[i] = &t[i];
  }
  return OpTiles(std::move(p));
}

}  // namespace

bool DeviceTiles::as_host() const {
  int found = as_host_.load();
  if (found < 0) as_host_.store(found = host_exact(tiles) ? 1 : 0);
  return found == 1;
}

std::shared_ptr<const DeviceTiles> keep_on_device(TileTensor t) {
  auto d = std::make_shared<DeviceTiles>();
  d->tiles = std::move(t);
  zero_padding(d->tiles);
  return d;
}

void check_op_inputs(const std::string& op, int n, bool scalar) {
  const TtOpDesc& d = tt_op(op);
  const std::string name = d.name;
  if (d.takes_scalar && scalar && n != d.min_inputs)
    throw InputError(name + ": expected one input with --scalar (ttnn." + name + "(a, float)), found " +
                     std::to_string(n));
  if (d.takes_scalar && !scalar && n != d.max_inputs)
    throw InputError(name + ": expected two inputs A B, or one with --scalar S, found " + std::to_string(n));
  if (scalar && !d.takes_scalar) throw InputError(name + ": --scalar applies to " + scalar_ops() + " only");
  if (n < d.min_inputs || n > d.max_inputs)
    throw InputError(name + ": expected inputs " + d.operands + ", found " + std::to_string(n) + " input" +
                     (n == 1 ? "" : "s"));
}

OpResult run_tt_op(const OpRequest& req) {
  const TtOpDesc& d = tt_op(req.op);
  const int n = static_cast<int>(req.inputs.size());
  check_op_inputs(req.op, n, req.scalar.has_value());
  std::vector<OpOperand> operands;
  std::vector<std::string> names;
  for (const OpInput& i : req.inputs) {
    if (i.tiles) {  // an earlier op's output: a float tile tensor of at least one element
      operands.push_back({i.tiles->tiles.shape});
      names.push_back(i.name);
      continue;
    }
    if (i.tensor.ndim() == 0 || i.tensor.numel() == 0)
      throw InputError(i.name + ": expected a tensor with at least one dimension and one element, found shape " +
                       shape_str(i.tensor.shape()));
    if (!dtype_is_float(i.tensor.dtype()))
      throw InputError(i.name + ": expected a floating-point tensor, found " + dtype_name(i.tensor.dtype()));
    operands.push_back({i.tensor.shape()});
    names.push_back(i.name);
  }
  // The op's own keys leave the backend object before it is parsed.
  nlohmann::ordered_json backend = nlohmann::ordered_json::object(), params = nlohmann::ordered_json::object();
  for (const auto& [key, v] : req.options.items()) {
    bool own = false;
    for (const OpParam& p : d.params) own = own || key == p.key;
    (own ? params : backend)[key] = v;
  }
  if (d.check) d.check(OpCheck{operands, names, params, req.scalar.has_value()});

  const TtOptions o = parse_tt_options(backend, "op options");
  const std::string name = d.name;
  if (d.host_only) {
    if (req.output_dtype)
      throw InputError(name + ": the output dtype is the input's --dtype; --output-dtype does not apply");
    if (o.math_fidelity || o.fp32_dest_acc_en || o.math_approx_mode || o.core_grid)
      throw InputError(name + ": a host conversion has no compute config (math_fidelity, fp32_dest_acc_en, "
                              "math_approx_mode, core_grid do not apply)");
  }
  std::vector<DataFormat> fmt;
  for (const OpInput& i : req.inputs) fmt.push_back(i.dtype.value_or(o.dtype.value_or(DataFormat::Bfloat16)));
  const DataFormat out_fmt = req.output_dtype.value_or(fmt[0]);

  const OpTiles t = input_tiles(d, req, operands, fmt);

  TtDevice dev(o);
  dev.set_memory(o.memory.value_or(MemoryKind::DRAM));
  OpResult res;
  nlohmann::json& info = res.info;
  info["op"] = d.name;
  info["device"] = o.device.name;
  info["arch"] = arch_name(o.device.arch);
  info["tt_metal"] = tt_metal_json(o.tt_metal);
  info["inputs"] = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    const OpInput& in = req.inputs[static_cast<size_t>(i)];
    // A device input's values are float32 (mha.ttnn's tensors).
    info["inputs"].push_back({{"name", in.name},
                              {"shape", operands[static_cast<size_t>(i)].dims},
                              {"file_dtype", in.tiles ? "float32" : dtype_name(in.tensor.dtype())},
                              {"dtype", format_name(fmt[static_cast<size_t>(i)])},
                              {"layout", "TILE"}});
  }
  if (!params.empty()) info["params"] = params;
  OpCall call{dev, o, t, out_fmt, params, req.scalar,
              std::string("ttnn.") + (d.host_only ? "from_torch" : d.name), info};
  TileTensor out = d.run(call);
  info["output"] = {{"shape", out.shape}, {"dtype", format_name(out.format)}};
  if (req.keep_output) res.tiles = keep_on_device(std::move(out));
  else res.output = to_tensor(out);
  info["memory_config"] = memory_name(dev.memory());
  info["program_cache"] = dev.per_op_json();
  info["programs"] = dev.program_keys();
  if (!dev.notes().empty()) info["notes"] = dev.notes();
  return res;
}

}  // namespace mha::ttsim
