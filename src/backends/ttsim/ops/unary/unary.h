#pragma once
// ttnn.exp and ttnn.reciprocal on the emulated device: the eltwise_sfpu
// kernel per tile (unary_kernel.h).
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/unary/unary_kernel.h"

namespace mha::ttsim {

struct UnaryAttributes {
  UnaryOp op = UnaryOp::Exp;
  ComputeConfig compute;  // math_approx_mode, fp32_dest_acc_en, output, bfp8_pack_precise
  template <class V>
  void fields(V& v) {
    compute.fields(v, fields::kDerived);
  }
};

TileTensor run_unary(TtDevice& dev, const std::string& op, const TileTensor& a, const UnaryAttributes& attrs);

}  // namespace mha::ttsim
