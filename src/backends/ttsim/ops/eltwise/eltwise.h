#pragma once
// ttnn.add and ttnn.multiply on the emulated device (FPU ELWADD / ELWMUL):
// b broadcasts over a's leading dims where b has 1, and over rows when b
// has one row (a bias); multiply by a Python float makes the scalar a bf16
// operand.
#include <optional>
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim {

struct EltwiseAttributes {
  // output, fp32_dest_acc_en, bfp8_pack_precise; math_fidelity for multiply.
  ComputeConfig compute;
  template <class V>
  void fields(V& v) {
    compute.fields(v, fields::kDerived);
  }
};

TileTensor run_add(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                   const EltwiseAttributes& attrs);
TileTensor run_multiply(TtDevice& dev, const std::string& op, const TileTensor& a, const TileTensor& b,
                        const EltwiseAttributes& attrs);
TileTensor run_multiply_scalar(TtDevice& dev, const std::string& op, const TileTensor& a, float scalar,
                               const EltwiseAttributes& attrs);

// The attributes of an add / multiply with output `out`, Dst mode, packing,
// the generation whose matrix unit computes (the device's) and fidelity
// (the rest TT-NN's defaults).
EltwiseAttributes eltwise_attributes(DataFormat out, bool fp32_dest, bool bfp8_pack_precise, Arch arch,
                                     MathFidelity fidelity = MathFidelity::HiFi4);

}  // namespace mha::ttsim
