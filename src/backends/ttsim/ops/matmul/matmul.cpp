// ttnn.matmul and ttnn.linear: one program (the matmul TT-NN generates for
// the shapes, a linear's bias added by the same program).
#include <algorithm>

#include "backends/ttsim/ops/op_table.h"
#include "backends/ttsim/ops/eltwise/eltwise.h"
#include "backends/ttsim/ops/matmul/matmul.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// A (..., M, K) and B (K, N) or (..., K, N) with A's leading dims; a
// linear's B is a 2-D (in, out) weight and its BIAS one row of N.
void check_matmul_shapes(const std::string& name, const OpCheck& c) {
  const Shape &a = c.inputs[0].shape(), &b = c.inputs[1].shape();
  if (a.size() < 2 || b.size() < 2)
    throw InputError(name + ": expected A (..., M, K) and B (K, N) with at least 2 dims, found A " + shape_str(a) +
                     " and B " + shape_str(b));
  if (a.back() != b[b.size() - 2])
    throw InputError(name + ": inner dims differ: A " + shape_str(a) + " has K = " + std::to_string(a.back()) +
                     ", B " + shape_str(b) + " has K = " + std::to_string(b[b.size() - 2]));
  if (name == "linear" && b.size() != 2)
    throw InputError("linear: expected B as a 2-D weight (K, N) (TT-NN's (in, out) layout), found " + shape_str(b));
  if (b.size() > 2 && !std::equal(b.begin(), b.end() - 2, a.begin(), a.end() - 2))
    throw InputError(name + ": expected B 2-D (K, N) or with A's leading dims " +
                     shape_str(Shape(a.begin(), a.end() - 2)) + ", found B " + shape_str(b));
  if (c.inputs.size() == 3) {
    const Shape& bias = c.inputs[2].shape();
    const bool row = bias.size() == 1 || (bias.size() == 2 && bias[0] == 1);
    if (!row || bias.back() != b.back())
      throw InputError("linear: expected BIAS of shape (" + std::to_string(b.back()) + ") or (1, " +
                       std::to_string(b.back()) + ") (B's N), found " + shape_str(bias));
  }
}

void check_matmul(const OpCheck& c) { check_matmul_shapes("matmul", c); }
void check_linear(const OpCheck& c) { check_matmul_shapes("linear", c); }

// A linear's bias is the (1, N) row TT-NN's linear adds to every row.
Shape linear_shape(int i, const Shape& s) { return i == 2 ? Shape{1, s.back()} : s; }

TileTensor run_matmul_op(OpCall& c) {
  const TtOptions& o = c.opt;
  MatmulAttributes at;
  ComputeConfig& cfg = at.compute;
  // `@` / linear without a core_grid: HiFi2 unless both operands are block
  // float; a core_grid selects LoFi (docs/TTSIM.md).
  const bool lofi = (block_float(c.in[0].format) && block_float(c.in[1].format)) || o.core_grid.has_value();
  cfg.math_fidelity = o.math_fidelity.value_or(lofi ? MathFidelity::LoFi : MathFidelity::HiFi2);
  cfg.fp32_dest_acc_en = o.fp32_dest_acc_en.value_or(false);
  apply_device(cfg, o);
  cfg.math_approx_mode = o.math_approx_mode.value_or(true);
  cfg.numerics = o.numerics;
  cfg.output = c.out_format;
  cfg.bfp8_pack_precise = o.bfp8_pack_precise.value_or(false);
  at.grid = o.core_grid.value_or(Grid{o.device.grid_y, o.device.grid_x});
  at.core_grid = o.core_grid.has_value();
  at.bias = c.in.size() == 3;
  // With a bias the matmul leaves its result in the program's intermediate
  // buffer, which the fused bias add reads.
  TileTensor out = run_matmul(c.dev, c.program, c.in[0], c.in[1], at);
  if (at.bias) {
    Muted m(c.dev);  // the bias is part of the linear's program
    out = run_add(c.dev, c.program, out, c.in[2],
                  eltwise_attributes(c.out_format, cfg.fp32_dest_acc_en, cfg.bfp8_pack_precise, cfg.arch));
  }
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", cfg.fp32_dest_acc_en},
                                     {"math_fidelity", fidelity_name(cfg.math_fidelity)},
                                     {"math_approx_mode", cfg.math_approx_mode}};
  c.info["core_grid"] = {at.grid.y, at.grid.x};
  c.info["attributes"] = fields::json_of(at);
  return out;
}

}  // namespace

extern const TtOpDesc kOpMatmul = {
    "matmul", "A B", "ttnn.matmul: A (..., M, K) @ B (K, N) or (..., K, N), on the program TT-NN generates",
    "HiFi2; LoFi when both inputs are block float or a core_grid is given; fp32 Dst off", 2, 2,
    false, false, {}, check_matmul, nullptr, run_matmul_op};

extern const TtOpDesc kOpLinear = {
    "linear", "A B [BIAS]", "ttnn.linear: the matmul, then the bias row (N) added in the same program (ELWADD)",
    "as matmul", 2, 3, false, false, {}, check_linear, linear_shape, run_matmul_op};

}  // namespace mha::ttsim
