#include "backends/ttsim/ttsim_ops.h"

#include <algorithm>

#include "backends/ttsim/ttsim_matmul_program.h"
#include "ttsim/eltwise.h"
#include "ttsim/formats.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

std::string cfg_attrs(const ComputeConfig& c) {
  return std::string(fidelity_name(c.math_fidelity)) + ",fp32_acc=" + (c.fp32_dest_acc_en ? "1" : "0") +
         ",approx=" + (c.math_approx_mode ? "1" : "0") + ",out=" + format_name(c.output) +
         ",bfp8_pack_precise=" + (c.bfp8_pack_precise ? "1" : "0");
}

std::string grid_attrs(Grid g) { return ",grid=" + std::to_string(g.y) + "x" + std::to_string(g.x); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// Circular buffers of the multicast matmul: per core, double-buffered in0
// (per_core_M x in0_block_w) and in1 (in0_block_w x per_core_N) blocks and
// the whole output block.
TileTensor op_matmul(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                     const ComputeConfig& cfg, Grid grid, bool core_grid, bool bias) {
  const double macs = static_cast<double>(a.batch) * a.prows * a.pcols * b.pcols * fidelity_phase_count(cfg.math_fidelity);
  TtDevice::OpTimer timer(dev, op, macs);
  const int64_t Mt = a.batch * a.prows / kTile, Kt = a.pcols / kTile, Nt = b.pcols / kTile;
  MatmulCall call = matmul_call(a, b, cfg);
  call.bias = bias;
  call.core_grid = core_grid;
  call.grid = grid;
  call.all_dram = dev.memory() == MemoryKind::DRAM;
  call.l1_bytes = dev.options().device.l1_bytes;
  call.packer_l1_acc = dev.options().packer_l1_acc;
  const MatmulChoice choice = choose_matmul_program(call);
  dev.program(op, cfg_attrs(cfg) + grid_attrs(grid) + "," + matmul_choice_str(choice, Kt), {&a, &b});
  ComputeConfig c = cfg;
  if (bias) c.output = choice.blocking.interm;
  Shape out_shape = a.shape;
  out_shape.back() = b.cols;
  // A batched matmul walks its batches one matrix at a time per core, so a
  // core's output block never spans more than one matrix's rows.
  const int64_t pm = std::min(ceil_div(Mt, grid.y), a.prows / kTile), pn = ceil_div(Nt, grid.x);
  const int64_t bw = choice.blocking.blocks(Kt) == 1 ? std::min<int64_t>(Kt, 2) : choice.blocking.in0_block_w;
  const int64_t cb = 2 * pm * bw * tile_bytes(a.format) + 2 * bw * pn * tile_bytes(b.format) +
                     pm * pn * tile_bytes(c.output);
  dev.check_memory_cb(op, {&a, &b}, out_shape, c.output, cb);
  TileTensor out;
  tt_matmul(a, b, out, c, dev.exec(), choice.blocking);
  return out;
}

TileTensor op_add(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b, DataFormat out_fmt,
                  bool fp32_dest, bool bfp8_pack_precise) {
  TtDevice::OpTimer timer(dev, op);
  dev.program(op,
              std::string("out=") + format_name(out_fmt) + ",fp32_acc=" + (fp32_dest ? "1" : "0") +
                  ",bfp8_pack_precise=" + (bfp8_pack_precise ? "1" : "0"),
              {&a, &b});
  if (b.cols != a.cols || (b.rows != 1 && b.rows != a.rows))
    throw InputError("tt-sim: " + op + ": cannot broadcast " + shape_str(b.shape) + " onto " + shape_str(a.shape));
  dev.check_memory_cb(op, {&a, &b}, a.shape, out_fmt, 2 * (tile_bytes(a.format) + tile_bytes(b.format) + tile_bytes(out_fmt)));
  TileTensor out = make_tile_tensor(a.shape, out_fmt);
  tt_add(a, b, out, fp32_dest, bfp8_pack_precise, dev.exec(), dev.options().device.arch);
  return out;
}

TileTensor op_mul_scalar(TtDevice& dev, const std::string& op, const TileTensor& a, float scalar, DataFormat out_fmt,
                         MathFidelity fidelity, bool fp32_dest, bool bfp8_pack_precise) {
  TtDevice::OpTimer timer(dev, op);
  dev.program(op,
              std::string("scalar,") + fidelity_name(fidelity) + ",out=" + format_name(out_fmt) +
                  ",bfp8_pack_precise=" + (bfp8_pack_precise ? "1" : "0"),
              {&a});
  dev.check_memory_cb(op, {&a}, a.shape, out_fmt, 2 * (2 * tile_bytes(a.format) + tile_bytes(out_fmt)));
  TileTensor out = make_tile_tensor(a.shape, out_fmt);
  tt_mul_scalar(a, scalar, out, fidelity, fp32_dest, bfp8_pack_precise, dev.exec(), dev.options().device.arch);
  return out;
}

// The softmax kernel holds a whole row of tiles (input and exps) per core.
TileTensor op_softmax(TtDevice& dev, const std::string& op, const TileTensor& a, const ComputeConfig& cfg) {
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, cfg_attrs(cfg), {&a});
  const int64_t wt = a.pcols / kTile;
  const DataFormat im = cfg.fp32_dest_acc_en ? DataFormat::Float32 : DataFormat::Bfloat16;
  dev.check_memory_cb(op, {&a}, a.shape, cfg.output,
                      wt * (tile_bytes(a.format) + tile_bytes(im)) + 4 * tile_bytes(im) + 2 * tile_bytes(cfg.output));
  TileTensor out;
  tt_softmax(a, out, cfg, dev.exec());
  return out;
}

TileTensor op_move(TtDevice& dev, const std::string& op, const TileTensor& in, const std::vector<float>& values,
                   const Shape& shape, DataFormat out_fmt) {
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, std::string("out=") + format_name(out_fmt) + ",shape=" + shape_str(shape), {&in});
  dev.check_memory_cb(op, {&in}, shape, out_fmt, 4 * (tile_bytes(in.format) + tile_bytes(out_fmt)));
  TileTensor t = make_tile_tensor(shape, out_fmt);
  // Each matrix on the pool: its rows copied, then (block float) repacked.
  const bool repack = bfp_magnitude_bits(out_fmt) > 0;
  dev.exec().parallel_for(t.batch, [&](int64_t b, int) {
    float* m = t.matrix(b);
    for (int64_t r = 0; r < t.rows; ++r) std::copy_n(values.data() + (b * t.rows + r) * t.cols, t.cols, m + r * t.pcols);
    if (repack)
      for (int64_t r = 0; r < t.prows; ++r)
        pack_from_dst(m + r * t.pcols, m + r * t.pcols, t.pcols, out_fmt, /*fp32_dest=*/false, /*bfp8_pack_precise=*/false);
  });
  return t;
}

}  // namespace mha::ttsim
