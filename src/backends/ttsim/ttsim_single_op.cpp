#include "backends/ttsim/ttsim_single_op.h"

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

}  // namespace

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
  std::vector<Tensor> host;
  std::vector<std::string> names;
  for (const OpInput& i : req.inputs) {
    if (i.tensor.ndim() == 0 || i.tensor.numel() == 0)
      throw InputError(i.name + ": expected a tensor with at least one dimension and one element, found shape " +
                       shape_str(i.tensor.shape()));
    if (!dtype_is_float(i.tensor.dtype()))
      throw InputError(i.name + ": expected a floating-point tensor, found " + dtype_name(i.tensor.dtype()));
    host.push_back(i.tensor);
    names.push_back(i.name);
  }
  // The op's own keys leave the backend object before it is parsed.
  nlohmann::ordered_json backend = nlohmann::ordered_json::object(), params = nlohmann::ordered_json::object();
  for (const auto& [key, v] : req.options.items()) {
    bool own = false;
    for (const OpParam& p : d.params) own = own || key == p.key;
    (own ? params : backend)[key] = v;
  }
  if (d.check) d.check(OpCheck{host, names, params, req.scalar.has_value()});

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

  // ttnn.from_torch(x, dtype, layout=TILE_LAYOUT) for every input, into
  // the buffers of this thread's previous op: a script's ops one after
  // another (a decode step per cache depth and config) then reuse the pages
  // a KV cache took once, where fresh ones cost the kernel's zeroing, more
  // than the conversion itself (to_tile_layout releases a buffer twice the
  // size needed).
  static thread_local std::vector<TileTensor> t;
  t.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const Tensor& x = host[static_cast<size_t>(i)];
    // float32 values are read in place (a KV cache is most of an op's
    // host work); other dtypes are converted to float32 first.
    std::vector<float> v;
    const float* p = x.dtype() == DType::F32 ? x.data<float>() : (v = x.to_f32()).data();
    const Shape s = d.device_shape ? d.device_shape(i, x.shape()) : x.shape();
    to_tile_layout(p, s, fmt[static_cast<size_t>(i)], t[static_cast<size_t>(i)]);
  }

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
    info["inputs"].push_back({{"name", in.name},
                              {"shape", in.tensor.shape()},
                              {"file_dtype", dtype_name(in.tensor.dtype())},
                              {"dtype", format_name(fmt[static_cast<size_t>(i)])},
                              {"layout", "TILE"}});
  }
  if (!params.empty()) info["params"] = params;
  OpCall call{dev, o, t, out_fmt, params, req.scalar,
              std::string("ttnn.") + (d.host_only ? "from_torch" : d.name), info};
  const TileTensor out = d.run(call);
  res.output = to_tensor(out);
  info["output"] = {{"shape", res.output.shape()}, {"dtype", format_name(out.format)}};
  info["memory_config"] = memory_name(dev.memory());
  info["program_cache"] = dev.per_op_json();
  info["programs"] = dev.program_keys();
  if (!dev.notes().empty()) info["notes"] = dev.notes();
  return res;
}

}  // namespace mha::ttsim
