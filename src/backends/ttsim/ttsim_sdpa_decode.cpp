// The SDPA pipeline's KV-cache session (ttsim_sdpa.h, backends/decode.h).
// The caches live on the device in the recipe's cache dtype, [B, Hkv, S,
// dh] with S the session's capacity rounded up to the decode k chunk
// (tt_transformers allocates max_seq_len rows, a multiple of it). The first
// append prefills every user (fill_cache); each later token is one decode
// step of every user at cur_pos = length().
#include <algorithm>

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ttsim_sdpa.h"
#include "backends/ttsim/ops/kv_cache/kv_cache.h"
#include "backends/ttsim/ops/rotary_llama/rotary_llama.h"
#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"
#include "backends/ttsim/ttsim_sdpa_steps.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// SDPA_DECODE_PROGCFG's k_chunk_size on Wormhole.
constexpr int64_t kDecodeChunk = 256;

class SdpaDecodeSession : public DecodeSession {
 public:
  SdpaDecodeSession(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w, const AttentionSpec& spec,
                    const DecodeOptions& opt)
      : dev_(dev), r_(r), w_(w), spec_(spec), opt_(opt), d_(sdpa_dims(spec)) {
    check_decode_options(spec, opt);
    // The cache is the backend's kv_cache_dtype; a decode config naming
    // another format (q4_0, float16, ...) would run silently in this one.
    // float32, the config's default, means "the backend's".
    const std::string asked = cache_dtype_name(opt.cache_dtype);
    if (opt.cache_dtype != CacheDtype::Float32 && asked != format_name(r.cache))
      throw InputError("decode.cache_dtype: tt-sim holds the KV cache in the backend's kv_cache_dtype (" +
                       std::string(format_name(r.cache)) + "), found " + asked +
                       " (expected it left out, or backend.kv_cache_dtype set to it: bfloat16, bfloat8_b or "
                       "bfloat4_b)");
    // Room for the prompt's padded prefill too (fill_cache writes Lp rows).
    const int64_t rows = std::max(opt.max_tokens, padded_prefill_len(opt.max_tokens));
    S_ = (rows + kDecodeChunk - 1) / kDecodeChunk * kDecodeChunk;
    cache_k_ = make_tile_tensor({opt.batch, d_.Hkv, S_, d_.dh}, r.cache);
    cache_v_ = make_tile_tensor({opt.batch, d_.Hkv, S_, d_.dh}, r.cache);
  }

  Tensor append(const Tensor& x) override {
    check_append(spec_, opt_, len_, x);
    dev_.set_memory(MemoryKind::DRAM);
    std::vector<const TileTensor*> resident = w_.all();
    resident.push_back(&cache_k_);
    resident.push_back(&cache_v_);
    dev_.set_resident(resident);
    const int64_t n = x.dim(1);
    Tensor y(DType::F32, {opt_.batch, n, d_.E_out});
    if (len_ == 0) {
      prefill(x, y);
    } else {
      // Later multi-token appends (a prompt after fill_synthetic) run token
      // by token through the decode ops (no chunked prefill here).
      for (int64_t i = 0; i < n; ++i) step(x, i, y);
    }
    return y;
  }

  int64_t length() const override { return len_; }

  std::string cache_format() const override { return format_name(r_.cache); }

  int64_t cache_bytes() const override {
    return 2 * opt_.batch * d_.Hkv * ((len_ + kTile - 1) / kTile) * (d_.dh / kTile) * tile_bytes(r_.cache);
  }

  // Synthetic keys and values for positions len_ .. len_ + n - 1: the cpu
  // backend's values (element (b Hkv + g, position, d) of stream `seed`, k
  // even, v odd; keys' columns in Meta order for a rotary spec), quantised
  // to the cache dtype row by row as from_torch would (a row's face rows
  // share their exponents; rows never share one).
  void fill_synthetic(int64_t n, uint64_t seed) override {
    check_fill(opt_, len_, n);
    const int64_t T = opt_.max_tokens, dh = d_.dh, half = dh / 2;
    std::vector<float> rows(static_cast<size_t>(n * dh));
    for (int kv = 0; kv < 2; ++kv) {
      TileTensor& c = kv == 0 ? cache_k_ : cache_v_;
      const bool meta = kv == 0 && spec_.rope;
      for (int64_t m = 0; m < c.batch; ++m) {
        for (int64_t j = 0; j < n; ++j)
          for (int64_t d = 0; d < dh; ++d) {
            const uint64_t i = static_cast<uint64_t>((m * T + len_ + j) * dh + d);
            const int64_t col = meta ? (d < half ? 2 * d : 2 * (d - half) + 1) : d;
            rows[j * dh + col] = synthetic_value(seed, 2 * i + kv);
          }
        const TileTensor q = to_tile_layout(rows.data(), {n, dh}, r_.cache);
        for (int64_t p = 0; p < n; ++p) std::copy_n(q.matrix(0) + p * q.pcols, dh, c.matrix(m) + (len_ + p) * c.pcols);
      }
    }
    len_ += n;
  }

 private:
  void prefill(const Tensor& x, Tensor& y) {
    const int64_t n = x.dim(1), Lp = padded_prefill_len(n);
    std::optional<RopeTable> rope;
    if (spec_.rope) rope = rope_table_at(spec_, 0, n);
    for (int64_t b = 0; b < opt_.batch; ++b) {
      const PrefillOut o = sdpa_prefill_user(dev_, r_, w_, spec_, user_rows(x, b, Lp, r_.act), rope ? &*rope : nullptr,
                                             b, &cache_k_, &cache_v_);
      const std::vector<float> out = first_rows(o.out, n);
      std::copy(out.begin(), out.end(), y.data<float>() + b * n * d_.E_out);
    }
    len_ = n;
  }

  // Token i of x [B, n, E] for every user at position len_.
  void step(const Tensor& x, int64_t i, Tensor& y) {
    const int64_t B = opt_.batch, n = x.dim(1);
    std::vector<float> rows(static_cast<size_t>(B * d_.E));
    for (int64_t b = 0; b < B; ++b) std::copy_n(x.data<float>() + (b * n + i) * d_.E, d_.E, &rows[b * d_.E]);
    const TileTensor xt = to_tile_layout(rows.data(), {1, 1, B, d_.E}, r_.act);
    QkvHeads h = create_qkv_heads_decode(dev_, d_, sdpa_qkv_linear(dev_, r_, w_, xt, false));
    qk_norm_heads(dev_, r_, w_, spec_, h);
    const std::vector<int64_t> cur_pos(static_cast<size_t>(B), len_);
    if (spec_.rope) {
      const std::vector<RopeTable> per_user(static_cast<size_t>(B), rope_table_at(spec_, len_, 1));
      const TileTensor trans = rotary_llama_trans_mat(DataFormat::Bfloat16);
      const RotaryTables t = rotary_decode_tables(per_user);
      RotaryAttributes ra;
      ra.is_decode_mode = true;
      ra.compute = r_.rotary;
      h.q = run_rotary_llama(dev_, h.q, t.cos, t.sin, trans, ra);
      h.k = run_rotary_llama(dev_, h.k, t.cos, t.sin, trans, ra);
    }
    // The model passes paged_update_cache no compute config (the defaults).
    run_paged_update_cache(dev_, cache_k_, h.k, cur_pos, nullptr, CacheAttributes{});
    run_paged_update_cache(dev_, cache_v_, h.v, cur_pos, nullptr, CacheAttributes{});
    // SDPA_DECODE_PROGCFG: the recipe's grid, k_chunk_size, exp_approx_mode False.
    SdpaDecodeConfig c;
    c.k_chunk_size = kDecodeChunk;
    c.sliding_window_size = spec_.window;
    c.attention_sink = w_.sinks;
    c.exp_approx_mode = false;
    c.grid_x = r_.grid.x;
    c.grid_y = r_.grid.y;
    c.scale = static_cast<float>(spec_.scale);
    c.compute = r_.sdpa_decode;
    c.compute.output = r_.act;
    // The window: token p sees p - W < j <= p (model/mask.h), TT-NN's
    // [cur_pos - W + 1, cur_pos].
    const TileTensor attn = run_sdpa_decode(dev_, h.q, cache_k_, cache_v_, cur_pos, nullptr, c);
    const TileTensor ctx = concat_heads_decode(dev_, attn);
    const TileTensor out = spec_.out ? sdpa_out_linear(dev_, r_, w_, ctx, false) : ctx;
    const std::vector<float> o = first_rows(out, B);
    for (int64_t b = 0; b < B; ++b) std::copy_n(&o[b * d_.E_out], d_.E_out, y.data<float>() + (b * n + i) * d_.E_out);
    ++len_;
  }

  TtDevice& dev_;
  const SdpaRecipe& r_;
  const SdpaWeights& w_;
  AttentionSpec spec_;
  DecodeOptions opt_;
  SdpaDims d_;
  int64_t S_ = 0, len_ = 0;
  TileTensor cache_k_, cache_v_;
};

}  // namespace

std::unique_ptr<DecodeSession> make_sdpa_decode(TtDevice& dev, const SdpaRecipe& r, const SdpaWeights& w,
                                                const AttentionSpec& spec, const DecodeOptions& opt) {
  return std::make_unique<SdpaDecodeSession>(dev, r, w, spec, opt);
}

}  // namespace mha::ttsim
