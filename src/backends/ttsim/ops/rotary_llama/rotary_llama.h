#pragma once
// ttnn.experimental.rotary_embedding_llama on the emulated device
// (rotary_llama_kernel.h): x [1, n, s, dh] with cos / sin [1, 1, s, dh]
// (prefill), or x [1, b, nh, dh] with cos / sin [1, b, 1, dh] (decode).
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"

namespace mha::ttsim {

struct RotaryAttributes {
  bool is_decode_mode = false;
  ComputeConfig compute;  // TT-NN's defaults for the op: HiFi4, fp32 Dst off
  RotaryAttributes() { compute.math_fidelity = MathFidelity::HiFi4; }
  template <class V>
  void fields(V& v) {
    v("is_decode_mode", is_decode_mode, "false (default, prefill) or true (decode)");
    compute.fields(v, fields::kDerived);
  }
};

// Output in attrs.compute.output.
TileTensor run_rotary_llama(TtDevice& dev, const TileTensor& x, const TileTensor& cos, const TileTensor& sin,
                            const TileTensor& trans, const RotaryAttributes& attrs);

}  // namespace mha::ttsim
