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

// ttnn.experimental.rotary_embedding_llama_fused_qk(q [1, b, nh, dh], k [1,
// b, nkv, dh], cos, sin [1, b, 1 or 32, dh], trans): one program whose q
// cores and k cores run the decode kernel (rotary_embedding_llama_sharded.cpp,
// the intermediates in x's, cos's and sin's formats as the non-fused op's),
// so each output is rotary_embedding_llama's decode output; the factory
// takes q's dtype for k's buffers, so q and k must share it. Returns both,
// the heads concatenated: [1, b, nh + nkv, dh] (q's heads, then k's), in
// attrs.compute.output.
TileTensor run_rotary_llama_fused_qk(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& cos,
                                     const TileTensor& sin, const TileTensor& trans, const RotaryAttributes& attrs);

}  // namespace mha::ttsim
