#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"

#include <string>

#include "ttsim/eltwise.h"
#include "util/error.h"

namespace mha::ttsim {

TileTensor rotary_llama_trans_mat(DataFormat format) {
  TileTensor t = make_tile_tensor({1, 1, kTile, kTile}, format);
  for (int64_t i = 0; i < kTile; i += 2) {
    t.at(0, i, i + 1) = 1.0f;
    t.at(0, i + 1, i) = -1.0f;
  }
  return t;
}

namespace {

// [1, b, 32, dh] tables keep their first row (the sharded kernel broadcasts
// row 0 of each tile): returns the [1, b, 1, dh] table the FPU reads.
TileTensor first_rows(const TileTensor& t) {
  if (t.rows == 1) return t;
  Shape s = t.shape;
  s[2] = 1;
  TileTensor r = make_tile_tensor(s, t.format);
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t c = 0; c < t.pcols; ++c) r.at(b, 0, c) = t.at(b, 0, c);
  return r;
}

}  // namespace

TileTensor tt_rotary_llama(const TileTensor& x, const TileTensor& cos, const TileTensor& sin, const TileTensor& trans,
                           RotaryMode mode, const ComputeConfig& cfg, const Exec& ex) {
  const std::string what = mode == RotaryMode::Prefill ? "rotary_embedding_llama (prefill)" : "rotary_embedding_llama (decode)";
  if (x.shape.size() != 4 || cos.shape.size() != 4 || sin.shape != cos.shape)
    throw InputError(what + ": expected 4-D X, COS and SIN with COS and SIN alike, found X " + shape_str(x.shape) +
                     ", COS " + shape_str(cos.shape) + ", SIN " + shape_str(sin.shape));
  if (trans.shape != Shape{1, 1, kTile, kTile})
    throw InputError(what + ": expected TRANS [1, 1, 32, 32], found " + shape_str(trans.shape));
  const int64_t dh = x.shape[3];
  if (dh % kTile != 0 || cos.shape[3] != dh)
    throw InputError(what + ": head dim " + std::to_string(dh) + " must be a multiple of 32 and COS/SIN's last dim (" +
                     std::to_string(cos.shape[3]) + ")");
  TileTensor c = cos, s = sin;
  if (mode == RotaryMode::Prefill) {
    const bool heads_ok = cos.shape[1] == 1 || cos.shape[1] == x.shape[1];
    if (cos.shape[0] != 1 || !heads_ok || cos.shape[2] != x.shape[2])
      throw InputError(what + ": expected COS/SIN [1, 1 or nh, S, dh] for X [b, nh, S, dh] " + shape_str(x.shape) +
                       ", found " + shape_str(cos.shape));
  } else {
    if (x.shape[0] != 1 || cos.shape[0] != 1 || cos.shape[1] != x.shape[1] ||
        (cos.shape[2] != 1 && cos.shape[2] != kTile))
      throw InputError(what + ": expected X [1, b, nh, dh] and COS/SIN [1, b, 1, dh] (or [1, b, 32, dh]), found X " +
                       shape_str(x.shape) + ", COS " + shape_str(cos.shape));
    if (x.shape[2] > kTile)
      throw InputError(what + ": " + std::to_string(x.shape[2]) + " heads do not fit one tile of 32 rows (TT-NN's limit)");
    c = first_rows(cos);
    s = first_rows(sin);
  }
  // rotated = x @ T tile by tile: every 32-wide chunk of a row is one row of
  // a (rows * Wt) x 32 matrix, so one matmul against T gives each tile's bits.
  TileTensor chunks = make_tile_tensor({x.batch * x.prows * (x.pcols / kTile), kTile}, x.format);
  chunks.data = x.data;
  TileTensor t2 = make_tile_tensor({kTile, kTile}, trans.format);
  t2.data = trans.data;
  ComputeConfig mm = cfg;
  mm.output = x.format;
  TileTensor rotated;
  tt_matmul(chunks, t2, rotated, mm, ex);
  TileTensor rot = make_tile_tensor(x.shape, x.format);
  rot.data = rotated.data;  // the same row-major values, back in x's shape
  TileTensor sin_im = make_tile_tensor(x.shape, s.format), cos_im = make_tile_tensor(x.shape, c.format);
  tt_mul(rot, s, sin_im, cfg.math_fidelity, cfg.fp32_dest_acc_en, cfg.bfp8_pack_precise, ex, cfg.arch);
  tt_mul(x, c, cos_im, cfg.math_fidelity, cfg.fp32_dest_acc_en, cfg.bfp8_pack_precise, ex, cfg.arch);
  TileTensor out = make_tile_tensor(x.shape, cfg.output);
  tt_add(cos_im, sin_im, out, cfg.fp32_dest_acc_en, cfg.bfp8_pack_precise, ex, cfg.arch);
  return out;
}

}  // namespace mha::ttsim
