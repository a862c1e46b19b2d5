// The streaming SDPA oracle: sdpa_standard_v2's loop nest (every batch x
// head, every q chunk in order, its k chunks inside streaming_q_chunk) on
// the scalar lane models, one thread.
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "util/error.h"

namespace mha::ttsim {

void tt_sdpa_streaming_oracle(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                              TileTensor& out, const SdpaConfig& cfg, int64_t chunk_start) {
  const std::string p =
      sdpa_streaming_problem(q.shape, k.shape, v.shape, mask ? &mask->shape : nullptr, cfg, chunk_start);
  if (!p.empty()) throw InputError("sdpa: " + p);
  const StreamingInputs in = streaming_pad(q, k, v, mask, cfg);
  out = make_tile_tensor(sdpa_out_shape(q, v), cfg.compute.output);
  const StreamingRun run = streaming_run(in, cfg, nullptr, out, chunk_start);
  StreamingWork w;
  for (int64_t bh = 0; bh < q.shape[0] * q.shape[1]; ++bh)
    for (int64_t qc = 0; qc < in.q.rows / cfg.q_chunk_size; ++qc) streaming_q_chunk(run, bh, qc, w);
}

}  // namespace mha::ttsim
