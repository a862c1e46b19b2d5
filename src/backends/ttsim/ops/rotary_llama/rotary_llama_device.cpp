#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"

#include <algorithm>

#include "util/error.h"

namespace mha::ttsim {

// Per core: x, cos, sin and the rotated tiles of one row of dh, the
// transformation tile, the output double-buffered.
TileTensor run_rotary_llama(TtDevice& dev, const TileTensor& x, const TileTensor& cos, const TileTensor& sin,
                            const TileTensor& trans, const RotaryAttributes& at) {
  const std::string op = "ttnn.experimental.rotary_embedding_llama";
  TtDevice::OpTimer timer(dev, op);
  const int64_t wt = x.pcols / kTile, im = tile_bytes(DataFormat::Bfloat16);
  const int64_t cb = wt * (tile_bytes(x.format) + tile_bytes(cos.format) + tile_bytes(sin.format) + 2 * im) +
                     tile_bytes(trans.format) + 2 * wt * tile_bytes(at.compute.output);
  launch_program(dev, op, program_key(at), {&x, &cos, &sin, &trans}, x.shape, at.compute.output, cb);
  return tt_rotary_llama(x, cos, sin, trans, at.is_decode_mode ? RotaryMode::Decode : RotaryMode::Prefill, at.compute,
                         dev.exec());
}

TileTensor run_rotary_llama_fused_qk(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& cos,
                                     const TileTensor& sin, const TileTensor& trans, const RotaryAttributes& at) {
  const std::string op = "ttnn.experimental.rotary_embedding_llama_fused_qk";
  if (q.shape.size() != 4 || k.shape.size() != 4 || q.shape[0] != 1 || k.shape[0] != 1 || q.shape[1] != k.shape[1] ||
      q.shape[3] != k.shape[3])
    throw InputError(op + ": Q " + shape_str(q.shape) + " and K " + shape_str(k.shape) +
                     " must be [1, b, nh, dh] and [1, b, nkv, dh] with the same b and dh");
  if (q.format != k.format)
    throw InputError(op + ": K is " + format_name(k.format) + ", Q " + format_name(q.format) +
                     " (the program takes Q's dtype for K's buffers)");
  TtDevice::OpTimer timer(dev, op);
  const int64_t wt = q.pcols / kTile, im = tile_bytes(DataFormat::Bfloat16);
  const int64_t cb = wt * (tile_bytes(q.format) + tile_bytes(cos.format) + tile_bytes(sin.format) + 2 * im) +
                     tile_bytes(trans.format) + 2 * wt * tile_bytes(at.compute.output);
  const int64_t b = q.shape[1], nh = q.shape[2], nkv = k.shape[2];
  launch_program(dev, op, program_key(at), {&q, &k, &cos, &sin, &trans}, {1, b, nh + nkv, q.shape[3]},
                 at.compute.output, cb);
  const TileTensor qr = tt_rotary_llama(q, cos, sin, trans, RotaryMode::Decode, at.compute, dev.exec());
  const TileTensor kr = tt_rotary_llama(k, cos, sin, trans, RotaryMode::Decode, at.compute, dev.exec());
  TileTensor out = make_tile_tensor({1, b, nh + nkv, q.shape[3]}, at.compute.output);
  for (int64_t u = 0; u < b; ++u) {  // the rows are whole values in the output's format: a copy keeps them
    std::copy(qr.matrix(u), qr.matrix(u) + nh * qr.pcols, out.matrix(u));
    std::copy(kr.matrix(u), kr.matrix(u) + nkv * kr.pcols, out.matrix(u) + nh * out.pcols);
  }
  return out;
}

}  // namespace mha::ttsim
