#pragma once
// ttnn.rms_norm(x, epsilon, weight, compute_kernel_config) on the emulated
// device, interleaved (no program config, no memory config: TT-NN's
// multi-core factory): x tiled, any rank, normalised over its last dim;
// weight bfloat16 ROW_MAJOR (the model's [1, 1, W/32, 32]). The kernel is
// rms_norm_kernel.h's.
#include <string>
#include <vector>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/rms_norm/rms_norm_kernel.h"

namespace mha::ttsim {

struct RmsNormAttributes {
  float epsilon = 1e-12f;  // ttnn.rms_norm's default
  ComputeConfig compute;   // the caller's compute_kernel_config
  template <class V>
  void fields(V& v) {
    v("epsilon", epsilon, "added to mean(x^2) before the root (default 1e-12), truncated to bf16 by the reader");
    compute.fields(v, fields::kDerived);
  }
};

// TT-NN's checks, InputError "rms_norm: why": the weight's element count
// equals x's last dim.
void validate_rms_norm(const TileTensor& x, const std::vector<float>* gamma);

// Circular buffers per core as the factory sizes them for RMS norm without
// a pre-add (input row, x^2 row, weight row, statistics, output blocks).
int64_t rms_norm_cb_bytes(const TileTensor& x, bool has_gamma, const ComputeConfig& c);

// validate, the frame (device_op.h), the kernel. `gamma`: x.cols bfloat16
// values (the weight as the device holds it), or null. Output in
// attrs.compute.output.
TileTensor run_rms_norm(TtDevice& dev, const TileTensor& x, const std::vector<float>* gamma,
                        const RmsNormAttributes& attrs);

// A weight as ttnn.as_tensor(bfloat16) holds it, `offset_one` first adding
// 1 in float32 as tt_transformers' RMSNorm does (add_unit_offset, Gemma's
// (1 + w)); padded with zeros to the next multiple of 32.
std::vector<float> rms_norm_weight_bf16(const float* w, int64_t n, bool offset_one);

}  // namespace mha::ttsim
