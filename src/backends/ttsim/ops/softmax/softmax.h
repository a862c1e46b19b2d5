#pragma once
// ttnn.softmax(dim=-1), numeric_stable=false, on the emulated device; the
// kernel is softmax_kernel.h's.
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim {

struct SoftmaxAttributes {
  ComputeConfig compute;  // TT-NN's softmax defaults: softmax_default_config()
  template <class V>
  void fields(V& v) {
    compute.fields(v, fields::kDerived);
  }
};

TileTensor run_softmax(TtDevice& dev, const std::string& op, const TileTensor& a, const SoftmaxAttributes& attrs);

}  // namespace mha::ttsim
