#include "backends/ttsim/ops/rms_norm/rms_norm.h"

#include "ttsim/formats.h"
#include "util/error.h"

namespace mha::ttsim {

void validate_rms_norm(const TileTensor& x, const std::vector<float>* gamma) {
  if (gamma && static_cast<int64_t>(gamma->size()) != x.pcols)
    throw InputError("rms_norm: the weight has " + std::to_string(gamma->size()) +
                     " values (padded), expected one per column of x (" + std::to_string(x.cols) + ", padded " +
                     std::to_string(x.pcols) + ")");
}

// layernorm_multi_core's sizes for RMS norm: block = the largest divisor of
// Wt up to 4 (fp32 Dst) or 8; in0 Wt input tiles, out0 2 blocks, x^2 Wt
// intermediate tiles, E[x^2] 2 and 1/rms 8 intermediate tiles, scaler and
// eps 2 bf16 tiles each; with a weight, Wt weight tiles and 2 blocks of the
// gamma intermediate.
int64_t rms_norm_cb_bytes(const TileTensor& x, bool has_gamma, const ComputeConfig& c) {
  const int64_t Wt = x.pcols / kTile;
  int64_t blk = c.fp32_dest_acc_en ? 4 : 8;
  while (Wt % blk != 0) --blk;
  const int64_t im = tile_bytes(c.fp32_dest_acc_en ? DataFormat::Float32 : DataFormat::Bfloat16);
  const int64_t bf16 = tile_bytes(DataFormat::Bfloat16);
  int64_t cb = Wt * tile_bytes(x.format) + 2 * blk * tile_bytes(c.output) + (Wt + 2 + 8) * im + 4 * bf16;
  if (has_gamma) cb += Wt * bf16 + 2 * blk * im;
  return cb;
}

TileTensor run_rms_norm(TtDevice& dev, const TileTensor& x, const std::vector<float>* gamma,
                        const RmsNormAttributes& at) {
  const std::string op = "ttnn.rms_norm";
  validate_rms_norm(x, gamma);
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(at), {&x}, x.shape, at.compute.output,
                 rms_norm_cb_bytes(x, gamma != nullptr, at.compute),
                 "the factory holds a whole row of tiles per core");
  TileTensor out;
  tt_rms_norm(x, gamma ? *gamma : std::vector<float>{}, at.epsilon, out, at.compute, dev.exec());
  return out;
}

std::vector<float> rms_norm_weight_bf16(const float* w, int64_t n, bool offset_one) {
  std::vector<float> g(static_cast<size_t>((n + kTile - 1) / kTile * kTile), 0.0f);
  for (int64_t i = 0; i < n; ++i) g[i] = host_round_bf16(offset_one ? w[i] + 1.0f : w[i]);
  return g;
}

}  // namespace mha::ttsim
