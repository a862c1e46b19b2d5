#include "backends/ttsim/ttsim_sdpa_steps.h"

#include <algorithm>

#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "backends/ttsim/ops/eltwise/eltwise.h"
#include "backends/ttsim/ops/matmul/matmul.h"
#include "backends/ttsim/ops/rms_norm/rms_norm.h"

namespace mha::ttsim {

SdpaDims sdpa_dims(const AttentionSpec& spec) {
  return {spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.q_in(), spec.out_dim()};
}

TileTensor linear_bias(TtDevice& dev, const char* op, const TileTensor& x, const TileTensor& w,
                       const std::optional<TileTensor>& b, const ComputeConfig& c, Grid grid, int64_t in0_block_w) {
  MatmulAttributes at;
  at.compute = c;
  at.grid = grid;
  at.in0_block_w = in0_block_w;
  const TileTensor y = run_matmul(dev, op, x, w, at);
  if (!b) return y;
  return run_add(dev, "ttnn.add", y, *b, eltwise_attributes(y.format, c.fp32_dest_acc_en, c.bfp8_pack_precise, c.arch));
}

namespace {

// Head `h`'s columns [c0 + h dh, +dh) of rows [0, rows) of matrix m of src
// into matrix `dst_m` of dst (whole padded rows: a head is whole tiles).
void copy_head(const TileTensor& src, int64_t m, int64_t c0, TileTensor& dst, int64_t dst_m, int64_t dh) {
  for (int64_t r = 0; r < src.prows; ++r)
    std::copy_n(src.matrix(m) + r * src.pcols + c0, dh, dst.matrix(dst_m) + r * dst.pcols);
}

}  // namespace

TileTensor sdpa_qkv_linear(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const TileTensor& x,
                           bool prefill) {
  ComputeConfig c = r.qkv;
  c.output = r.act;
  return linear_bias(dev, "ttnn.linear", x, w.wqkv, w.bqkv, c, r.grid, prefill ? 1 : 0);
}

TileTensor sdpa_out_linear(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const TileTensor& ctx,
                           bool prefill) {
  ComputeConfig c = r.wo;
  c.output = prefill ? r.out_prefill : r.out_decode;
  return linear_bias(dev, prefill ? "ttnn.linear" : "ttnn.matmul", ctx, w.wo, w.bo, c, r.grid, 0);
}

QkvHeads create_qkv_heads(TtDevice& dev, const SdpaDims& d, const TileTensor& xqkv) {
  const char* op = "ttnn.experimental.nlp_create_qkv_heads";
  const int64_t s = xqkv.rows;
  QkvHeads h{make_tile_tensor({1, d.H, s, d.dh}, xqkv.format), make_tile_tensor({1, d.Hkv, s, d.dh}, xqkv.format),
             make_tile_tensor({1, d.Hkv, s, d.dh}, xqkv.format)};
  for (int64_t i = 0; i < d.H; ++i) copy_head(xqkv, 0, i * d.dh, h.q, i, d.dh);
  for (int64_t i = 0; i < d.Hkv; ++i) {
    copy_head(xqkv, 0, (d.H + i) * d.dh, h.k, i, d.dh);
    copy_head(xqkv, 0, (d.H + d.Hkv + i) * d.dh, h.v, i, d.dh);
  }
  h.q = run_head_movement(dev, op, program_key(HeadsAttributes{d.H, d.Hkv}), xqkv, std::move(h.q));
  return h;
}

QkvHeads create_qkv_heads_decode(TtDevice& dev, const SdpaDims& d, const TileTensor& xqkv) {
  const char* op = "ttnn.experimental.nlp_create_qkv_heads_decode";
  const int64_t users = xqkv.rows;
  QkvHeads h{make_tile_tensor({1, users, d.H, d.dh}, xqkv.format),
             make_tile_tensor({1, users, d.Hkv, d.dh}, xqkv.format),
             make_tile_tensor({1, users, d.Hkv, d.dh}, xqkv.format)};
  // Row u of xqkv holds user u's heads side by side; each becomes a row of
  // that user's [heads, dh] matrix.
  for (int64_t u = 0; u < users; ++u) {
    const float* row = xqkv.matrix(0) + u * xqkv.pcols;
    for (int64_t i = 0; i < d.H; ++i) std::copy_n(row + i * d.dh, d.dh, h.q.matrix(u) + i * h.q.pcols);
    for (int64_t i = 0; i < d.Hkv; ++i) {
      std::copy_n(row + (d.H + i) * d.dh, d.dh, h.k.matrix(u) + i * h.k.pcols);
      std::copy_n(row + (d.H + d.Hkv + i) * d.dh, d.dh, h.v.matrix(u) + i * h.v.pcols);
    }
  }
  h.q = run_head_movement(dev, op, program_key(HeadsAttributes{d.H, d.Hkv}), xqkv, std::move(h.q));
  return h;
}

void qk_norm_heads(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec, QkvHeads& h) {
  if (!spec.qk_norm) return;
  RmsNormAttributes a;
  a.epsilon = static_cast<float>(spec.qk_norm->eps);  // configuration.norm_eps
  a.compute = r.qk_norm;
  h.q = run_rms_norm(dev, h.q, &w.q_norm, a);
  h.k = run_rms_norm(dev, h.k, &w.k_norm, a);
}

TileTensor concat_heads(TtDevice& dev, const TileTensor& ctx) {
  const char* op = "ttnn.experimental.nlp_concat_heads";
  const int64_t H = ctx.batch, dh = ctx.cols;
  TileTensor out = make_tile_tensor({1, 1, ctx.rows, H * dh}, ctx.format);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < ctx.prows; ++r) std::copy_n(ctx.matrix(h) + r * ctx.pcols, dh, out.matrix(0) + r * out.pcols + h * dh);
  return run_head_movement(dev, op, "", ctx, std::move(out));
}

TileTensor concat_heads_decode(TtDevice& dev, const TileTensor& ctx) {
  const char* op = "ttnn.experimental.nlp_concat_heads_decode";
  const int64_t users = ctx.batch, H = ctx.rows, dh = ctx.cols;
  TileTensor out = make_tile_tensor({1, 1, users, H * dh}, ctx.format);
  for (int64_t u = 0; u < users; ++u)
    for (int64_t h = 0; h < H; ++h) std::copy_n(ctx.matrix(u) + h * ctx.pcols, dh, out.matrix(0) + u * out.pcols + h * dh);
  return run_head_movement(dev, op, "", ctx, std::move(out));
}

namespace {

// One table row in Meta order: columns 2f and 2f + 1 take frequency f.
void meta_row(const float* c, const float* s, int64_t half, float* cos_out, float* sin_out) {
  for (int64_t f = 0; f < half; ++f) {
    cos_out[2 * f] = cos_out[2 * f + 1] = c[f];
    sin_out[2 * f] = sin_out[2 * f + 1] = s[f];
  }
}

}  // namespace

RotaryTables rotary_prefill_tables(const RopeTable& t, int64_t b, int64_t rows) {
  const int64_t dh = 2 * t.half;
  std::vector<float> c(static_cast<size_t>(rows * dh), 0.0f), s(c.size(), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    if (i < t.L) {
      meta_row(t.cos_at(b, i), t.sin_at(b, i), t.half, &c[i * dh], &s[i * dh]);
    } else {
      std::fill_n(&c[i * dh], dh, 1.0f);  // angle 0 for the padding rows
    }
  }
  return {to_tile_layout(c.data(), {1, 1, rows, dh}, DataFormat::Bfloat16),
          to_tile_layout(s.data(), {1, 1, rows, dh}, DataFormat::Bfloat16)};
}

RotaryTables rotary_decode_tables(const std::vector<RopeTable>& per_user) {
  const int64_t users = static_cast<int64_t>(per_user.size()), dh = 2 * per_user.front().half;
  std::vector<float> c(static_cast<size_t>(users * dh)), s(c.size());
  for (int64_t u = 0; u < users; ++u)
    meta_row(per_user[u].cos_at(0, 0), per_user[u].sin_at(0, 0), per_user[u].half, &c[u * dh], &s[u * dh]);
  return {to_tile_layout(c.data(), {1, users, 1, dh}, DataFormat::Bfloat16),
          to_tile_layout(s.data(), {1, users, 1, dh}, DataFormat::Bfloat16)};
}

void meta_to_hf(std::vector<float>& v, int64_t dh) {
  const int64_t half = dh / 2;
  std::vector<float> tmp(static_cast<size_t>(dh));
  for (size_t r = 0; r + dh <= v.size(); r += dh) {
    for (int64_t i = 0; i < half; ++i) {
      tmp[i] = v[r + 2 * i];
      tmp[half + i] = v[r + 2 * i + 1];
    }
    std::copy(tmp.begin(), tmp.end(), v.begin() + r);
  }
}

}  // namespace mha::ttsim
