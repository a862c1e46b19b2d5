#include "backends/ttsim/ops/eltwise/eltwise.h"

#include "ttsim/eltwise.h"
#include "util/error.h"

namespace mha::ttsim {

EltwiseAttributes eltwise_attributes(DataFormat out, bool fp32_dest, bool bfp8_pack_precise, Arch arch,
                                     MathFidelity fidelity) {
  EltwiseAttributes a;
  a.compute.output = out;
  a.compute.fp32_dest_acc_en = fp32_dest;
  a.compute.bfp8_pack_precise = bfp8_pack_precise;
  a.compute.math_fidelity = fidelity;
  a.compute.arch = arch;
  return a;
}

namespace {

// Both inputs and the output double-buffered.
int64_t binary_cb(const TileTensor& a, const TileTensor& b, DataFormat out) {
  return 2 * (tile_bytes(a.format) + tile_bytes(b.format) + tile_bytes(out));
}

void check_broadcast(const std::string& op, const TileTensor& a, const TileTensor& b) {
  if (b.cols != a.cols || (b.rows != 1 && b.rows != a.rows))
    throw InputError("tt-sim: " + op + ": cannot broadcast " + shape_str(b.shape) + " onto " + shape_str(a.shape));
}

}  // namespace

TileTensor run_add(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                   const EltwiseAttributes& at) {
  TtDevice::OpTimer timer(dev, op);
  const ComputeConfig& c = at.compute;
  check_broadcast(op, a, b);
  launch_program(dev, op, program_key(at), {&a, &b}, a.shape, c.output, binary_cb(a, b, c.output));
  TileTensor out = make_tile_tensor(a.shape, c.output);
  tt_add(a, b, out, c.fp32_dest_acc_en, c.bfp8_pack_precise, dev.exec(), c.arch);
  return out;
}

TileTensor run_multiply(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                        const EltwiseAttributes& at) {
  TtDevice::OpTimer timer(dev, op);
  const ComputeConfig& c = at.compute;
  launch_program(dev, op, program_key(at), {&a, &b}, a.shape, c.output, binary_cb(a, b, c.output));
  TileTensor out = make_tile_tensor(a.shape, c.output);
  tt_mul(a, b, out, c.math_fidelity, c.fp32_dest_acc_en, c.bfp8_pack_precise, dev.exec(), c.arch);
  return out;
}

// The scalar's tile is the second input.
TileTensor run_multiply_scalar(TtDevice& dev, const std::string& op, const TileTensor& a, float scalar,
                               const EltwiseAttributes& at) {
  TtDevice::OpTimer timer(dev, op);
  const ComputeConfig& c = at.compute;
  launch_program(dev, op, "scalar," + program_key(at), {&a}, a.shape, c.output,
                 2 * (2 * tile_bytes(a.format) + tile_bytes(c.output)));
  TileTensor out = make_tile_tensor(a.shape, c.output);
  tt_mul_scalar(a, scalar, out, c.math_fidelity, c.fp32_dest_acc_en, c.bfp8_pack_precise, dev.exec(), c.arch);
  return out;
}

}  // namespace mha::ttsim
