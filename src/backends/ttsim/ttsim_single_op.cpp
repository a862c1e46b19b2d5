#include "backends/ttsim/ttsim_single_op.h"

#include <algorithm>

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ttsim_ops.h"
#include "backends/ttsim/ttsim_options.h"
#include "ttsim/sfpu.h"
#include "ttsim/eltwise.h"
#include "ttsim/unary.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::ttsim {

namespace {

struct OpDef {
  TtOp op;
  const char* name;
  const char* operands;
  int min_inputs, max_inputs;
};

constexpr OpDef kOps[] = {
    {TtOp::Matmul, "matmul", "A B", 2, 2},
    {TtOp::Linear, "linear", "A B [BIAS]", 2, 3},
    {TtOp::Add, "add", "A B", 2, 2},
    {TtOp::Multiply, "multiply", "A B, or A with --scalar S", 1, 2},
    {TtOp::Softmax, "softmax", "A", 1, 1},
    {TtOp::Exp, "exp", "A", 1, 1},
    {TtOp::Reciprocal, "reciprocal", "A", 1, 1},
    {TtOp::ToDevice, "to-device", "A", 1, 1},
};

const OpDef& def(TtOp op) {
  for (const OpDef& d : kOps)
    if (d.op == op) return d;
  return kOps[0];
}

bool block_float(DataFormat f) { return bfp_magnitude_bits(f) > 0; }

// Why b does not broadcast onto a as ttnn.add / ttnn.multiply broadcast
// (same last dim; one row or a's rows; leading dims right-aligned, each 1 or
// a's), or "" when it does. 1-D shapes are one row.
std::string broadcast_problem(const Shape& a, const Shape& b) {
  const size_t na = a.size(), nb = b.size();
  const int64_t a_rows = na >= 2 ? a[na - 2] : 1, b_rows = nb >= 2 ? b[nb - 2] : 1;
  bool ok = a.back() == b.back() && (b_rows == 1 || b_rows == a_rows);
  const size_t la = na >= 2 ? na - 2 : 0, lb = nb >= 2 ? nb - 2 : 0;
  if (lb > la) ok = false;
  for (size_t d = 0; ok && d < lb; ++d)
    if (b[d] != 1 && b[d] != a[d + la - lb]) ok = false;
  if (ok) return "";
  return "cannot broadcast B " + shape_str(b) + " onto A " + shape_str(a) +
         " (expected B's last dim equal to A's, one row or A's rows, leading dims 1 or A's)";
}

// The ops' shape rules, checked before anything is converted.
void check_shapes(TtOp op, const std::vector<OpInput>& in) {
  const std::string name = def(op).name;
  for (const OpInput& i : in) {
    if (i.tensor.ndim() == 0 || i.tensor.numel() == 0)
      throw InputError(i.name + ": expected a tensor with at least one dimension and one element, found shape " +
                       shape_str(i.tensor.shape()));
    if (!dtype_is_float(i.tensor.dtype()))
      throw InputError(i.name + ": expected a floating-point tensor, found " + dtype_name(i.tensor.dtype()));
  }
  if (op == TtOp::Matmul || op == TtOp::Linear) {
    const Shape &a = in[0].tensor.shape(), &b = in[1].tensor.shape();
    if (a.size() < 2 || b.size() < 2)
      throw InputError(name + ": expected A (..., M, K) and B (K, N) with at least 2 dims, found A " + shape_str(a) +
                       " and B " + shape_str(b));
    if (a.back() != b[b.size() - 2])
      throw InputError(name + ": inner dims differ: A " + shape_str(a) + " has K = " + std::to_string(a.back()) +
                       ", B " + shape_str(b) + " has K = " + std::to_string(b[b.size() - 2]));
    if (op == TtOp::Linear && b.size() != 2)
      throw InputError("linear: expected B as a 2-D weight (K, N) (TT-NN's (in, out) layout), found " + shape_str(b));
    if (b.size() > 2 && !std::equal(b.begin(), b.end() - 2, a.begin(), a.end() - 2))
      throw InputError(name + ": expected B 2-D (K, N) or with A's leading dims " +
                       shape_str(Shape(a.begin(), a.end() - 2)) + ", found B " + shape_str(b));
    if (in.size() == 3) {
      const Shape& c = in[2].tensor.shape();
      const bool row = c.size() == 1 || (c.size() == 2 && c[0] == 1);
      if (!row || c.back() != b.back())
        throw InputError("linear: expected BIAS of shape (" + std::to_string(b.back()) + ") or (1, " +
                         std::to_string(b.back()) + ") (B's N), found " + shape_str(c));
    }
  }
  if ((op == TtOp::Add || op == TtOp::Multiply) && in.size() == 2) {
    const std::string p = broadcast_problem(in[0].tensor.shape(), in[1].tensor.shape());
    if (!p.empty()) throw InputError(name + ": " + p);
  }
}

std::vector<float> f32_values(const Tensor& t) {
  const std::vector<double> v = t.to_f64();
  return std::vector<float>(v.begin(), v.end());
}

nlohmann::json compute_json(const ComputeConfig& c, bool fidelity_used, bool approx_used) {
  nlohmann::json j = {{"fp32_dest_acc_en", c.fp32_dest_acc_en}};
  if (fidelity_used) j["math_fidelity"] = fidelity_name(c.math_fidelity);
  if (approx_used) j["math_approx_mode"] = c.math_approx_mode;
  return j;
}

}  // namespace

TtOp tt_op_from_name(const std::string& name) {
  std::string all;
  for (const OpDef& d : kOps) {
    if (name == d.name) return d.op;
    all += std::string(all.empty() ? "" : ", ") + d.name;
  }
  throw InputError("unknown op '" + printable(name) + "': expected one of " + all);
}

const char* tt_op_operands(TtOp op) { return def(op).operands; }

void check_op_inputs(TtOp op, int n, bool scalar) {
  const OpDef& d = def(op);
  if (op == TtOp::Multiply && scalar && n != 1)
    throw InputError("multiply: expected one input with --scalar (ttnn.multiply(a, float)), found " + std::to_string(n));
  if (op == TtOp::Multiply && !scalar && n != 2)
    throw InputError("multiply: expected two inputs A B, or one with --scalar S, found " + std::to_string(n));
  if (scalar && op != TtOp::Multiply) throw InputError(std::string(d.name) + ": --scalar applies to multiply only");
  if (n < d.min_inputs || n > d.max_inputs)
    throw InputError(std::string(d.name) + ": expected inputs " + d.operands + ", found " + std::to_string(n) +
                     " input" + (n == 1 ? "" : "s"));
}

OpResult run_tt_op(const OpRequest& req) {
  const OpDef& d = def(req.op);
  const int n = static_cast<int>(req.inputs.size());
  check_op_inputs(req.op, n, req.scalar.has_value());
  check_shapes(req.op, req.inputs);

  const TtOptions o = parse_tt_options(req.options, "op options");
  if (req.op == TtOp::ToDevice) {
    if (req.output_dtype) throw InputError("to-device: the output dtype is the input's --dtype; --output-dtype does not apply");
    if (o.math_fidelity || o.fp32_dest_acc_en || o.math_approx_mode || o.grid_y)
      throw InputError("to-device: a host conversion has no compute config (math_fidelity, fp32_dest_acc_en, "
                       "math_approx_mode, core_grid do not apply)");
  }
  std::vector<DataFormat> fmt;
  for (const OpInput& i : req.inputs) fmt.push_back(i.dtype.value_or(o.dtype.value_or(DataFormat::Bfloat16)));
  const DataFormat out_fmt = req.output_dtype.value_or(fmt[0]);

  // ttnn.from_torch(x, dtype, layout=TILE_LAYOUT) for every input.
  std::vector<TileTensor> t;
  for (int i = 0; i < n; ++i) {
    const Tensor& x = req.inputs[static_cast<size_t>(i)].tensor;
    const std::vector<float> v = f32_values(x);
    Shape s = x.shape();
    // A linear's bias is the (1, N) row TT-NN's linear adds to every row.
    if (req.op == TtOp::Linear && i == 2) s = {1, x.shape().back()};
    t.push_back(to_tile_layout(v.data(), s, fmt[static_cast<size_t>(i)]));
  }

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
                              {"dtype", format_name(fmt[static_cast<size_t>(i)])},
                              {"layout", "TILE"}});
  }

  // Eltwise and unary ops: TT-NN turns fp32 accumulation on for a float32
  // input or output (preserve_fp32_precision).
  const bool f32_io = fmt[0] == DataFormat::Float32 || out_fmt == DataFormat::Float32;
  const std::string op_name = std::string("ttnn.") + (req.op == TtOp::ToDevice ? "from_torch" : d.name);
  const bool precise = o.bfp8_pack_precise.value_or(false);
  TileTensor out;
  switch (req.op) {
    case TtOp::ToDevice:
      out = t[0];
      break;
    case TtOp::Matmul:
    case TtOp::Linear: {
      ComputeConfig c;
      // `@` / linear without a core_grid: HiFi2 unless both operands are
      // block float; a core_grid selects LoFi (docs/TTSIM.md).
      const bool lofi = (block_float(fmt[0]) && block_float(fmt[1])) || o.grid_y;
      c.math_fidelity = o.math_fidelity.value_or(lofi ? MathFidelity::LoFi : MathFidelity::HiFi2);
      c.fp32_dest_acc_en = o.fp32_dest_acc_en.value_or(false);
      c.math_approx_mode = o.math_approx_mode.value_or(true);
      c.numerics = o.numerics;
      c.output = out_fmt;
      c.bfp8_pack_precise = precise;
      const Grid g{o.grid_y.value_or(o.device.grid_y), o.grid_x.value_or(o.device.grid_x)};
      // With a bias the matmul leaves its result in the program's
      // intermediate buffer, which the fused bias add reads.
      out = op_matmul(dev, op_name, t[0], t[1], c, g, o.grid_y.has_value(), n == 3);
      if (n == 3) {
        Muted m(dev);  // the bias is part of the linear's program
        out = op_add(dev, op_name, out, t[2], out_fmt, c.fp32_dest_acc_en, precise);
      }
      info["compute_kernel_config"] = compute_json(c, true, true);
      info["core_grid"] = {g.y, g.x};
      break;
    }
    case TtOp::Add: {
      const bool fp32 = o.fp32_dest_acc_en.value_or(f32_io);
      out = op_add(dev, op_name, t[0], t[1], out_fmt, fp32, precise);
      info["compute_kernel_config"] = {{"fp32_dest_acc_en", fp32}};
      break;
    }
    case TtOp::Multiply: {
      const bool fp32 = o.fp32_dest_acc_en.value_or(f32_io);
      const MathFidelity fid = o.math_fidelity.value_or(MathFidelity::HiFi4);
      if (req.scalar) {
        out = op_mul_scalar(dev, op_name, t[0], static_cast<float>(*req.scalar), out_fmt, fid, fp32, precise);
        info["scalar"] = *req.scalar;
        info["scalar_bf16"] = host_round_bf16(static_cast<float>(*req.scalar));
      } else {
        TtDevice::OpTimer timer(dev, op_name);
        dev.program(op_name, std::string(fidelity_name(fid)) + ",out=" + format_name(out_fmt), {&t[0], &t[1]});
        dev.check_memory_cb(op_name, {&t[0], &t[1]}, t[0].shape, out_fmt,
                            2 * (tile_bytes(t[0].format) + tile_bytes(t[1].format) + tile_bytes(out_fmt)));
        out = make_tile_tensor(t[0].shape, out_fmt);
        tt_mul(t[0], t[1], out, fid, fp32, precise, dev.exec());
      }
      info["compute_kernel_config"] = {{"math_fidelity", fidelity_name(fid)}, {"fp32_dest_acc_en", fp32}};
      break;
    }
    case TtOp::Softmax: {
      ComputeConfig c = softmax_default_config();
      c.math_fidelity = o.math_fidelity.value_or(c.math_fidelity);
      c.math_approx_mode = o.math_approx_mode.value_or(c.math_approx_mode);
      c.fp32_dest_acc_en = o.fp32_dest_acc_en.value_or(c.fp32_dest_acc_en);
      c.numerics = o.numerics;
      c.output = out_fmt;
      c.bfp8_pack_precise = precise;
      out = op_softmax(dev, op_name, t[0], c);
      info["compute_kernel_config"] = compute_json(c, true, true);
      break;
    }
    case TtOp::Exp:
    case TtOp::Reciprocal: {
      // ttnn.exp's fast_and_approx_mode and ttnn.reciprocal default to false.
      const bool approx = o.math_approx_mode.value_or(false);
      const bool fp32 = o.fp32_dest_acc_en.value_or(f32_io);
      const UnaryOp u = req.op == TtOp::Exp ? UnaryOp::Exp : UnaryOp::Reciprocal;
      TtDevice::OpTimer timer(dev, op_name);
      dev.program(op_name, std::string("approx=") + (approx ? "1" : "0") + ",fp32_acc=" + (fp32 ? "1" : "0") +
                               ",out=" + format_name(out_fmt), {&t[0]});
      dev.check_memory_cb(op_name, {&t[0]}, t[0].shape, out_fmt, 2 * (tile_bytes(t[0].format) + tile_bytes(out_fmt)));
      out = make_tile_tensor(t[0].shape, out_fmt);
      tt_unary(t[0], u, out, approx, fp32, precise, dev.exec());
      info["compute_kernel_config"] = {{"math_approx_mode", approx}, {"fp32_dest_acc_en", fp32}};
      break;
    }
  }
  res.output = to_tensor(out);
  info["output"] = {{"shape", res.output.shape()}, {"dtype", format_name(out.format)}};
  info["memory_config"] = memory_name(dev.memory());
  info["program_cache"] = dev.per_op_json();
  info["programs"] = dev.program_keys();
  return res;
}

}  // namespace mha::ttsim
