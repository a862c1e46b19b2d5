#pragma once
// ttnn.transformer.scaled_dot_product_attention on the emulated device. Its
// attributes are SdpaConfig (sdpa_kernel.h: the program config, causal
// flag, scale, window, sink, the compute config embedded, one field list).
#include <string>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"

namespace mha::ttsim {

// TT-NN's checks, InputError "sdpa: why" (shapes, chunk sizes, dtypes).
void validate_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                   const SdpaConfig& cfg);

// Circular buffers per core as the program factory sizes them (Q chunk, K
// and V chunks double-buffered, mask, qk, out_im, out_acc, out, statistics).
int64_t sdpa_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      const SdpaConfig& cfg);

// validate, the frame (device_op.h), the program the factory picks for
// the profile (2024's kernel; at latest the streaming kernel with a 16-bit
// Dst, sdpa_standard with an fp32 one): [b, nqh, s, dh] in
// cfg.compute.output.
TileTensor run_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                    const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg);

}  // namespace mha::ttsim
