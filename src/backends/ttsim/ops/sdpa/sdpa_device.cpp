#include "backends/ttsim/ops/sdpa/sdpa.h"

#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"

#include "util/error.h"

namespace mha::ttsim {

namespace {

void refuse_float32(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask) {
  const TileTensor* in[] = {&q, &k, &v, mask};
  for (int i = 0; i < 4; ++i)
    if (in[i] && in[i]->format == DataFormat::Float32)
      throw InputError(std::string("sdpa: input ") + std::to_string(i) +
                       " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b");
}

}  // namespace

void validate_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                   const SdpaConfig& cfg) {
  refuse_float32(q, k, v, mask);
  const std::string p = sdpa_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
}

int64_t sdpa_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      const SdpaConfig& cfg) {
  const int64_t sq = cfg.q_chunk_size / 32, sk = cfg.k_chunk_size / 32, dht = q.pcols / 32;
  const int64_t bf16 = tile_bytes(DataFormat::Bfloat16);
  int64_t b = sq * dht * tile_bytes(q.format) * 2 + sk * dht * (tile_bytes(k.format) + tile_bytes(v.format)) * 2;
  b += sq * sk * (mask ? tile_bytes(mask->format) : tile_bytes(DataFormat::Bfp4_b));
  b += (sq * sk + 2 * sq * dht + 6 * sq + 2) * bf16 + sq * dht * tile_bytes(cfg.compute.output);
  return b;
}

TileTensor run_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                    const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg) {
  validate_sdpa(q, k, v, mask, cfg);
  std::vector<const TileTensor*> ins = {&q, &k, &v};
  if (mask) ins.push_back(mask);
  const int64_t cb = sdpa_cb_bytes(q, k, v, mask, cfg);
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg), ins, q.shape, cfg.compute.output, cb);
  TileTensor out;
  tt_sdpa(q, k, v, mask, out, cfg, dev.exec());
  return out;
}

TileTensor run_sdpa_streaming(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                              const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg) {
  refuse_float32(q, k, v, mask);
  const std::string p = sdpa_streaming_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
  std::vector<const TileTensor*> ins = {&q, &k, &v};
  if (mask) ins.push_back(mask);
  const int64_t cb = sdpa_streaming_cb_bytes(q, k, v, mask, cfg);
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg), ins, q.shape, cfg.compute.output, cb);
  TileTensor out;
  tt_sdpa_streaming(q, k, v, mask, out, cfg, dev.exec());
  return out;
}

}  // namespace mha::ttsim
