// Multi-head latent attention's KV-cache session on tt-sim (ttsim_mla.h,
// backends/decode.h). The cache holds one latent row [c | k_rope] per
// position, [B, 1, S, kl + dr] in the recipe's cache dtype, S the capacity
// rounded up to the decode k chunk. The first append prefills every user
// (ttsim_mla_pipeline.cpp, plus fill_cache of the latent rows); each later
// token is one step of every user at cur_pos = length():
//
//   x [1, 1, B, E] (one row per user)
//   q = mla_query_rows                        -> [1, 1, B, H (dn + dr)]
//   q_nope [1, H, B, dn] -> matmul(W_kb) [1, H, B, kl] -> permute [1, B, H, kl]
//   q_pe [1, B, H, dr]; rotary_embedding_llama (decode mode)
//   concat                                    -> q [1, B, H, kl + dr]
//   kv = mla_latent_rows [1, 1, B, kl + dr]: rms_norm(c), rotary(k_pe) (decode
//   mode) as [1, B, 1, .], concat; paged_update_cache(cache, ., cur_pos)
//   flash_multi_latent_attention_decode(q, cache, head_dim_v = kl)
//                                             -> [1, B, H, kl]
//   permute [1, H, B, kl]; matmul(W_vb) [1, H, B, dv]; nlp_concat_heads;
//   matmul(wo) (+ bo)                         -> [1, 1, B, E_out]
#include <algorithm>

#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "backends/ttsim/ops/kv_cache/kv_cache.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama_kernel.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"
#include "backends/ttsim/ttsim_mla.h"
#include "backends/ttsim/ttsim_sdpa_steps.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// SDPA_DECODE_PROGCFG's k_chunk_size on Wormhole (as the SDPA session's).
constexpr int64_t kMlaDecodeChunk = 256;
// At tt_metal latest the decode factory (007f92d0) gives each core a tree
// receive buffer of (vDHt + 2 statistics) tiles per other core of its head:
// with V 512 wide and a user's heads spread over the whole 8x8 grid that is
// over L1, so the session caps the cores per head (2024's factory sizes no
// such buffer; its runs keep the whole grid).
constexpr int kMlaLatestCoresPerHead = 16;

// Columns [c0, c0 + n) of each head of x [1, 1, users, H * stride] as
// [1, users, H, n] (nlp_create_qkv_heads_decode's layout: one matrix per
// user, one row per head). Exact data movement.
TileTensor user_heads(TtDevice& dev, const TileTensor& x, int64_t H, int64_t stride, int64_t c0, int64_t n) {
  const int64_t users = x.rows;
  TileTensor out = make_tile_tensor({1, users, H, n}, x.format);
  for (int64_t u = 0; u < users; ++u)
    for (int64_t h = 0; h < H; ++h)
      std::copy_n(x.matrix(0) + u * x.pcols + h * stride + c0, n, out.matrix(u) + h * out.pcols);
  return run_head_movement(dev, "ttnn.experimental.nlp_create_qkv_heads_decode",
                           "c0=" + std::to_string(c0) + ",n=" + std::to_string(n), x, std::move(out));
}

// ttnn.permute(x, (0, 2, 1, 3)): [1, a, b, w] -> [1, b, a, w].
TileTensor swap_dims(TtDevice& dev, const TileTensor& x) {
  const int64_t a = x.shape[1], b = x.shape[2];
  TileTensor out = make_tile_tensor({1, b, a, x.cols}, x.format);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) std::copy_n(x.matrix(i) + j * x.pcols, x.cols, out.matrix(j) + i * out.pcols);
  return run_head_movement(dev, "ttnn.permute", "0,2,1,3", x, std::move(out));
}

class MlaDecodeSession : public DecodeSession {
 public:
  MlaDecodeSession(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w, const AttentionSpec& spec,
                   const DecodeOptions& opt)
      : dev_(dev), r_(r), w_(w), spec_(spec), opt_(opt) {
    check_decode_options(spec, opt);
    const std::string asked = cache_dtype_name(opt.cache_dtype);
    if (opt.cache_dtype != CacheDtype::Float32 && asked != format_name(r.cache))
      throw InputError("decode.cache_dtype: tt-sim holds the latent cache in the backend's kv_cache_dtype (" +
                       std::string(format_name(r.cache)) + "), found " + asked);
    const int64_t rows = std::max(opt.max_tokens, padded_prefill_len(opt.max_tokens));
    S_ = (rows + kMlaDecodeChunk - 1) / kMlaDecodeChunk * kMlaDecodeChunk;
    cache_ = make_tile_tensor({opt.batch, 1, S_, spec.mla->latent_width()}, r.cache);
  }

  Tensor append(const Tensor& x) override {
    check_append(spec_, opt_, len_, x);
    dev_.set_memory(MemoryKind::DRAM);
    std::vector<const TileTensor*> resident = w_.all();
    resident.push_back(&cache_);
    dev_.set_resident(resident);
    const int64_t n = x.dim(1);
    Tensor y(DType::F32, {opt_.batch, n, spec_.out_dim()});
    if (len_ == 0) {
      prefill(x, y);
    } else {
      for (int64_t i = 0; i < n; ++i) step(x, i, y);
    }
    return y;
  }

  int64_t length() const override { return len_; }
  std::string cache_format() const override { return format_name(r_.cache); }
  int64_t cache_bytes() const override {
    return opt_.batch * ((len_ + kTile - 1) / kTile) * (spec_.mla->latent_width() / kTile) * tile_bytes(r_.cache);
  }
  // Synthetic latent rows for positions len_ .. len_ + n - 1: the cpu and
  // reference sessions' values (element (b, position, d) of stream `seed`,
  // the even elements), quantised to the cache dtype row by row as
  // from_torch would (rows never share an exponent).
  void fill_synthetic(int64_t n, uint64_t seed) override {
    check_fill(opt_, len_, n);
    const int64_t T = opt_.max_tokens, lw = spec_.mla->latent_width();
    std::vector<float> rows(static_cast<size_t>(n * lw));
    for (int64_t b = 0; b < opt_.batch; ++b) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < lw; ++d)
          rows[j * lw + d] = synthetic_value(seed, 2 * static_cast<uint64_t>((b * T + len_ + j) * lw + d));
      const TileTensor q = to_tile_layout(rows.data(), {n, lw}, r_.cache);
      for (int64_t p = 0; p < n; ++p) std::copy_n(q.matrix(0) + p * q.pcols, lw, cache_.matrix(b) + (len_ + p) * cache_.pcols);
    }
    len_ += n;
  }

 private:
  void prefill(const Tensor& x, Tensor& y) {
    const int64_t n = x.dim(1), Lp = padded_prefill_len(n), E_out = spec_.out_dim();
    const RopeTable rope = rope_table_at(spec_, 0, n);
    for (int64_t b = 0; b < opt_.batch; ++b) {
      const MlaUserOut o = mla_prefill_user(dev_, r_, w_, spec_, user_rows(x, b, Lp, r_.act), rope, b, &cache_);
      const std::vector<float> out = first_rows(o.out, n);
      std::copy(out.begin(), out.end(), y.data<float>() + b * n * E_out);
    }
    len_ = n;
  }

  // The latent query [1, B, H, kl + dr] and row [1, B, 1, kl + dr] of x's
  // users at position len_ (rotary tables t, decode mode).
  TileTensor query(const TileTensor& xt, const RotaryTables& t, const TileTensor& trans, const RotaryAttributes& ra) {
    const Mla& m = *spec_.mla;
    const int64_t H = spec_.num_heads, dq = spec_.head_dim;
    const TileTensor q = mla_query_rows(dev_, r_, w_, spec_, xt);
    const TileTensor q_nope = mla_head_columns(dev_, "ttnn.slice", q, H, dq, 0, m.nope_dim);
    const TileTensor q_abs = swap_dims(dev_, mla_absorb(dev_, r_, w_, q_nope));
    const TileTensor q_pe = run_rotary_llama(dev_, user_heads(dev_, q, H, dq, m.nope_dim, m.rope_dim), t.cos, t.sin,
                                             trans, ra);
    return mla_concat_last(dev_, q_abs, q_pe);
  }
  TileTensor latent(const TileTensor& xt, const RotaryTables& t, const TileTensor& trans, const RotaryAttributes& ra) {
    const Mla& m = *spec_.mla;
    const TileTensor kv = mla_latent_rows(dev_, r_, w_, xt);
    const TileTensor c = mla_norm_latent(dev_, r_, w_, spec_, mla_head_columns(dev_, "ttnn.slice", kv, 1, 0, 0,
                                                                                m.kv_lora_rank));
    const TileTensor kr = run_rotary_llama(dev_, user_heads(dev_, kv, 1, 0, m.kv_lora_rank, m.rope_dim), t.cos,
                                           t.sin, trans, ra);
    return mla_concat_last(dev_, user_heads(dev_, c, 1, 0, 0, m.kv_lora_rank), kr);
  }

  // Token i of x [B, n, E] for every user at position len_.
  void step(const Tensor& x, int64_t i, Tensor& y) {
    const int64_t B = opt_.batch, n = x.dim(1), E = spec_.q_in(), E_out = spec_.out_dim();
    std::vector<float> rows(static_cast<size_t>(B * E));
    for (int64_t b = 0; b < B; ++b) std::copy_n(x.data<float>() + (b * n + i) * E, E, &rows[b * E]);
    const TileTensor xt = to_tile_layout(rows.data(), {1, 1, B, E}, r_.act);
    const std::vector<int64_t> cur_pos(static_cast<size_t>(B), len_);
    const RotaryTables t = rotary_decode_tables(std::vector<RopeTable>(static_cast<size_t>(B), rope_table_at(spec_, len_, 1)));
    const TileTensor trans = rotary_llama_trans_mat(DataFormat::Bfloat16);
    RotaryAttributes ra;
    ra.is_decode_mode = true;
    ra.compute = r_.rotary;
    const TileTensor q = query(xt, t, trans, ra);
    run_paged_update_cache(dev_, cache_, latent(xt, t, trans, ra), cur_pos, nullptr, CacheAttributes{});
    SdpaDecodeConfig c;
    c.k_chunk_size = kMlaDecodeChunk;
    c.exp_approx_mode = false;
    c.grid_x = r_.grid.x;
    c.grid_y = r_.grid.y;
    c.scale = static_cast<float>(spec_.scale);
    c.head_dim_v = spec_.mla->kv_lora_rank;
    c.compute = r_.sdpa_decode;
    if (c.compute.tt_metal == TtMetal::Latest) c.max_cores_per_head_batch = kMlaLatestCoresPerHead;
    c.compute.output = r_.act;
    const TileTensor attn = run_sdpa_decode(dev_, q, cache_, cache_, cur_pos, nullptr, c);
    const TileTensor ctx = concat_heads(dev_, mla_expand(dev_, r_, w_, swap_dims(dev_, attn)));
    ComputeConfig oc = r_.wo;
    oc.output = r_.out_decode;
    const TileTensor out = w_.has_out ? linear_bias(dev_, "ttnn.matmul", ctx, w_.wo, w_.bo, oc, r_.grid, 0) : ctx;
    const std::vector<float> o = first_rows(out, B);
    for (int64_t b = 0; b < B; ++b) std::copy_n(&o[b * E_out], E_out, y.data<float>() + (b * n + i) * E_out);
    ++len_;
  }

  TtDevice& dev_;
  const SdpaRecipe& r_;
  const MlaWeights& w_;
  AttentionSpec spec_;
  DecodeOptions opt_;
  int64_t S_ = 0, len_ = 0;
  TileTensor cache_;
};

}  // namespace

std::unique_ptr<DecodeSession> make_mla_decode(TtDevice& dev, const SdpaRecipe& r, const MlaWeights& w,
                                               const AttentionSpec& spec, const DecodeOptions& opt) {
  return std::make_unique<MlaDecodeSession>(dev, r, w, spec, opt);
}

}  // namespace mha::ttsim
