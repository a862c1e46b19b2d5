// mha._core: the library's entry points for the Python package (python/mha,
// docs/PYTHON.md). Each function is the library call the matching CLI
// command makes (src/cli/cmd_op.cpp, cmd_run.cpp, cmd_compare.cpp), with
// arrays instead of files; the Python layer turns torch tensors into these
// arrays and the results back. Errors: the library's InputError (bad input,
// one line) surfaces as mha.Error, a ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/ttsim/op_api.h"
#include "backends/ttsim/ttsim_options.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "compare/compare.h"
#include "compare/report.h"
#include "config/config.h"
#include "run/runner.h"
#include "run/timing.h"
#include "util/error.h"

namespace py = pybind11;

namespace mha::python {

namespace {

// A numpy array as a Tensor of the same dtype (float32/64, int32/64, bool),
// copied; `as` (optional) then names the dtype it holds exactly, e.g.
// "bfloat16" for float32 values that are a torch bfloat16 tensor's. With
// `borrow`, a C-contiguous array of the dtype is read in place
// (Tensor::borrow): the caller keeps `a` alive while the tensor lives.
Tensor to_tensor(const py::array& a, const std::string& what, const std::string& as = "", bool borrow = false) {
  DType t;
  const py::dtype d = a.dtype();
  if (d.is(py::dtype::of<float>())) t = DType::F32;
  else if (d.is(py::dtype::of<double>())) t = DType::F64;
  else if (d.is(py::dtype::of<int64_t>())) t = DType::I64;
  else if (d.is(py::dtype::of<int32_t>())) t = DType::I32;
  else if (d.is(py::dtype::of<bool>())) t = DType::Bool;
  else throw InputError(what + ": expected a float32, float64, int32, int64 or bool array, found dtype " +
                        std::string(py::str(static_cast<const py::handle&>(d))));
  Shape shape(a.shape(), a.shape() + a.ndim());
  if (borrow && as.empty() && (a.flags() & py::array::c_style)) return Tensor::borrow(t, shape, a.data());
  Tensor out(t, shape);
  const py::array c = py::array::ensure(a, py::array::c_style);
  if (out.nbytes() > 0) std::memcpy(out.raw(), c.data(), out.nbytes());
  if (as == "bfloat16") return out.cast(DType::BF16);
  if (as == "float16") return out.cast(DType::F16);
  return out;
}

// float32 / float64 / int64 as the same numpy dtype; 16-bit floats widen to
// float32 (exact), which the Python layer narrows back for torch.
py::array to_array(const Tensor& t0) {
  const Tensor t = (t0.dtype() == DType::BF16 || t0.dtype() == DType::F16) ? t0.cast(DType::F32) : t0;
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out;
  switch (t.dtype()) {
    case DType::F32: out = py::array_t<float>(shape); break;
    case DType::F64: out = py::array_t<double>(shape); break;
    case DType::I64: out = py::array_t<int64_t>(shape); break;
    case DType::I32: out = py::array_t<int32_t>(shape); break;
    default: return to_array(t.cast(DType::F32));  // bool, small ints: as float32
  }
  if (t.nbytes() > 0) std::memcpy(out.mutable_data(), t.raw(), t.nbytes());
  return out;
}

py::object json_to_py(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// An op's output kept on the device (mha._core.Tiles): what a mha.ttnn
// device tensor holds, so the next op takes it without a round trip through
// host values. Opaque to Python but for its values, read back on demand.
struct Tiles {
  std::shared_ptr<const ttsim::DeviceTiles> d;
};

// ttsim::to_row_major straight into the numpy array (one copy, not two).
py::array tiles_values(const Tiles& t) {
  const ttsim::TileTensor& x = t.d->tiles;
  py::array_t<float> out(std::vector<py::ssize_t>(x.shape.begin(), x.shape.end()));
  float* o = out.mutable_data();
  py::gil_scoped_release release;
  ttsim::to_row_major(x, o);
  return out;
}

// mha op NAME INPUT... -o OUT: ttsim::run_tt_op on arrays, or on Tiles an
// earlier op kept on the device; `keep`: the output stays Tiles too.
py::tuple op(const std::string& name, const std::vector<py::object>& tensors,
             const std::vector<std::optional<std::string>>& dtypes, const std::string& options_json,
             const std::optional<std::string>& output_dtype, const std::optional<double>& scalar, bool keep) {
  ttsim::OpRequest req;
  req.op = ttsim::tt_op(name).name;
  req.options = nlohmann::ordered_json::parse(options_json);
  req.scalar = scalar;
  req.keep_output = keep;
  if (output_dtype) req.output_dtype = ttsim::format_from_name(*output_dtype);
  std::vector<py::array> arrays;  // the borrowed inputs' owners, alive until the op returns
  arrays.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string what = name + " input " + std::to_string(i);
    ttsim::OpInput in{what, Tensor(), std::nullopt, nullptr};
    if (py::isinstance<Tiles>(tensors[i])) {
      in.tiles = tensors[i].cast<const Tiles&>().d;
    } else {
      // Read in place (a KV cache copied would cost as much as a decode
      // step's own work).
      arrays.push_back(tensors[i].cast<py::array>());
      in.tensor = to_tensor(arrays.back(), what, "", true);
    }
    if (i < dtypes.size() && dtypes[i]) in.dtype = ttsim::format_from_name(*dtypes[i]);
    req.inputs.push_back(std::move(in));
  }
  ttsim::OpResult res;
  {
    py::gil_scoped_release release;
    res = ttsim::run_tt_op(req);
  }
  py::object out = keep ? py::cast(Tiles{res.tiles}) : py::object(to_array(res.output));
  return py::make_tuple(out, json_to_py(res.info));
}

// A data-movement op (permute, reshape, head split / concat): ttsim::tt_move.
// `keep`: the result stays on the device (Tiles), as an op's output.
py::object move(const py::array& in, const std::string& in_format, const py::array& moved,
                const std::string& out_format, const std::string& op, bool keep) {
  // Read in place: both arrays outlive the call.
  const Tensor a = to_tensor(in, op + " input", "", true), b = to_tensor(moved, op + " result", "", true);
  const ttsim::DataFormat fi = ttsim::format_from_name(in_format), fo = ttsim::format_from_name(out_format);
  ttsim::TileTensor out;
  std::shared_ptr<const ttsim::DeviceTiles> kept;
  {
    py::gil_scoped_release release;
    out = ttsim::tt_move_tiles(a, fi, b, fo, op);
    if (keep) kept = ttsim::keep_on_device(std::move(out));
  }
  if (keep) return py::cast(Tiles{kept});
  return to_array(ttsim::to_tensor(out));
}

nlohmann::json run_report(const PreparedRun& run, const RunReport& rep) {
  nlohmann::json j;
  j["name"] = run.config.name;
  j["variant"] = run.config.variant;
  j["backend"] = rep.backend_name;
  j["backend_info"] = rep.backend_info;
  j["timing"] = timing_json(rep.timing);
  j["cache"] = {{"hits", rep.cache.hits}, {"misses", rep.cache.misses}};
  if (rep.decode) j["decode"] = decode_json(*rep.decode);
  if (rep.comparison) j["comparison"] = compare::to_json(*rep.comparison);
  return j;
}

// mha run --config C: the config (JSON text; `dir` resolves its relative
// paths, `file` prefixes messages), with `inputs` / `weights` given as arrays
// by name replacing the config's. One process: a "parallel" config is the
// CLI's (mpirun).
py::dict run(const std::string& config_json, const std::string& dir, const std::string& file, const py::dict& inputs,
             const std::optional<py::dict>& weights, bool need_weights, bool collect_stages,
             std::optional<int64_t> warmup, std::optional<int64_t> iterations) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(config_json);
  RunConfig config = parse_config(j, dir, file);
  if (config.parallel)
    throw InputError(file + ": a \"parallel\" config runs across MPI ranks: run it with mpirun mha run, not mha.run");
  TensorMap given;
  for (const auto& [k, v] : inputs) given[py::str(k)] = to_tensor(v.cast<py::array>(), "inputs." + std::string(py::str(k)));
  NamedTensors named;
  if (weights)
    for (const auto& [k, v] : *weights)
      named.emplace_back(py::str(k), to_tensor(v.cast<py::array>(), "weights." + std::string(py::str(k))));
  PreparedRun r;
  RunReport rep;
  {
    py::gil_scoped_release release;
    try {
      r = prepare_model(config);
      if (weights) {
        r.weights = bind_weights(*r.variant, named, file + ": weights");
        r.spec = r.variant->build_spec(r.weights, r.options);
      }
      prepare_inputs(r, given);
    } catch (const InputError& e) {
      throw InputError(file + ": " + e.what());
    }
    std::unique_ptr<Backend> backend = make_backend(config.backend, config.backend_options, file + ": backend");
    RunRequest req;
    req.need_weights = need_weights;
    req.collect_stages = collect_stages;
    req.warmup = warmup;
    req.iterations = iterations;
    rep = execute_run(r, *backend, req);
  }
  py::dict out;
  out["output"] = to_array(rep.result.output);
  out["attn_weights"] = rep.result.weights ? py::object(to_array(*rep.result.weights)) : py::none();
  py::dict stages;
  for (const auto& [name, t] : rep.result.stages) stages[py::str(name)] = to_array(t);
  out["stages"] = stages;
  out["report"] = json_to_py(run_report(r, rep));
  out["passed"] = !rep.comparison || rep.comparison->passed;
  out["text"] = rep.comparison ? compare::format_text(*rep.comparison) : std::string();
  return out;
}

std::optional<DType> compare_dtype(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  if (*s == "bfloat16" || *s == "bf16") return DType::BF16;
  if (*s == "float16" || *s == "fp16" || *s == "half") return DType::F16;
  if (*s == "float32" || *s == "fp32" || *s == "float") return DType::F32;
  throw InputError("dtype: expected bfloat16 (bf16), float16 (fp16, half) or float32 (fp32), found '" + *s + "'");
}

// mha compare REF OUT: compare::compare with `mha compare`'s settings
// (check_dtype on); tolerances left None keep the dtype's defaults.
py::dict compare_arrays(const py::array& ref, const std::string& ref_as, const py::array& out,
                        const std::string& out_as, const std::optional<std::string>& dtype, std::optional<double> atol,
                        std::optional<double> rtol, std::optional<double> pcc, std::optional<double> max_abs,
                        std::optional<double> mean_abs, std::optional<double> ulp, bool equal_nan, int top,
                        const std::string& ref_name, const std::string& out_name) {
  compare::Options opt;
  opt.as_dtype = compare_dtype(dtype);
  opt.atol = atol, opt.rtol = rtol, opt.pcc = pcc, opt.max_abs = max_abs, opt.mean_abs = mean_abs, opt.ulp = ulp;
  opt.equal_nan = equal_nan;
  opt.check_dtype = true;
  if (top < 0) throw InputError("top: expected a count >= 0, found " + std::to_string(top));
  opt.top_k = top;
  opt.ref_name = ref_name;
  opt.out_name = out_name;
  const Tensor r = to_tensor(ref, ref_name, ref_as), o = to_tensor(out, out_name, out_as);
  compare::Report rep;
  {
    py::gil_scoped_release release;
    rep = compare::compare(r, o, opt);
  }
  py::dict d;
  d["passed"] = rep.passed;
  d["report"] = json_to_py(compare::to_json(rep));
  d["text"] = compare::format_text(rep);
  return d;
}

// The device's worker grid (y, x), as tt-sim's options give it.
py::tuple device_grid(const std::string& device) {
  const ttsim::TtOptions o = ttsim::parse_tt_options({{"device", device}}, "device");
  return py::make_tuple(o.device.grid_y, o.device.grid_x);
}

py::list op_table() {
  py::list ops;
  for (const ttsim::TtOpDesc* d : ttsim::tt_ops()) {
    py::list params;
    for (const ttsim::OpParam& p : d->params) params.append(py::make_tuple(p.key, p.help));
    py::dict o;
    o["name"] = d->name, o["operands"] = d->operands, o["summary"] = d->summary, o["defaults"] = d->defaults;
    o["min_inputs"] = d->min_inputs, o["max_inputs"] = d->max_inputs, o["takes_scalar"] = d->takes_scalar;
    o["params"] = params;
    ops.append(o);
  }
  return ops;
}

}  // namespace

}  // namespace mha::python

PYBIND11_MODULE(_core, m) {
  using namespace mha::python;
  m.doc() = "mha's library: tt-sim ops, runs and comparisons on arrays (docs/PYTHON.md)";
  static py::exception<mha::InputError> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mha::InputError& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  py::class_<Tiles>(m, "Tiles")
      .def("values", &tiles_values)
      .def_property_readonly("shape", [](const Tiles& t) { return py::tuple(py::cast(t.d->tiles.shape)); })
      .def_property_readonly("dtype",
                             [](const Tiles& t) { return std::string(mha::ttsim::format_name(t.d->tiles.format)); });
  m.def("op", &op, py::arg("name"), py::arg("tensors"), py::arg("dtypes"), py::arg("options_json"),
        py::arg("output_dtype"), py::arg("scalar"), py::arg("keep") = false);
  m.def("move", &move, py::arg("input"), py::arg("input_format"), py::arg("moved"), py::arg("output_format"),
        py::arg("op"), py::arg("keep") = false);
  m.def("run", &run, py::arg("config_json"), py::arg("dir"), py::arg("file"), py::arg("inputs"), py::arg("weights"),
        py::arg("need_weights"), py::arg("collect_stages"), py::arg("warmup"), py::arg("iterations"));
  m.def("compare", &compare_arrays, py::arg("ref"), py::arg("ref_as"), py::arg("out"), py::arg("out_as"),
        py::arg("dtype"), py::arg("atol"), py::arg("rtol"), py::arg("pcc"), py::arg("max_abs"), py::arg("mean_abs"),
        py::arg("ulp"), py::arg("equal_nan"), py::arg("top"), py::arg("ref_name"), py::arg("out_name"));
  m.def("op_table", &op_table);
  m.def("device_grid", &device_grid, py::arg("device"));
}
