#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"

namespace mha::ttsim {

const char* sdpa_decode_program(bool paged, bool mla) {
  if (mla)
    return paged ? "ttnn.transformer.paged_flash_multi_latent_attention_decode"
                 : "ttnn.transformer.flash_multi_latent_attention_decode";
  return paged ? "ttnn.transformer.paged_scaled_dot_product_attention_decode"
               : "ttnn.transformer.scaled_dot_product_attention_decode";
}

namespace {

// The factory's circular buffers at latest (sdpa_decode_program_factory.cpp
// at 007f92d0, one core): Q and its tilize buffer, K and V double-buffered,
// the mask (the user's dtype, else Float16_b; a second one for a window),
// the scalars, the Float16_b intermediates and statistics (Q, mask, scalars,
// intermediates and statistics in 16x32 half tiles when the op is causal
// with at most 16 bfloat16 q heads), the tree's receive buffer, the output.
int64_t cb_bytes_latest(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                        int64_t k_chunk, int64_t cores_per_head, const SdpaDecodeConfig& cfg) {
  // vdht: V's and the output's tiles per row (MLA: head_dim_v / 32, V read from K).
  const int64_t dht = q.pcols / kTile, sk = (k_chunk + kTile - 1) / kTile;
  const int64_t vdht = cfg.head_dim_v > 0 ? cfg.head_dim_v / kTile : v.pcols / kTile;
  const int64_t pnht = (q.shape[2] + kTile - 1) / kTile;
  const bool half = cfg.is_causal && q.shape[2] <= 16 && q.format == DataFormat::Bfloat16;
  const auto tb = [&](DataFormat f, bool may_halve) { return tile_bytes(f) / (half && may_halve ? 2 : 1); };
  const DataFormat bf16 = DataFormat::Bfloat16;
  const int64_t qk = pnht * sk, out = pnht * vdht, stat = tb(bf16, true), im = tb(bf16, true);
  int64_t b = 2 * pnht * dht * tb(q.format, true) + 2 * sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format));
  b += qk * tb(mask ? mask->format : bf16, true) * (cfg.sliding_window_size > 0 ? 2 : 1);
  b += 2 * tb(bf16, true) + tile_bytes(bf16);                 // scale, zero; the column identity
  b += qk * im + 3 * out * im;                                // qk_im, out_im, out_acc, out_acc_2
  b += (pnht * 11 + (out + 2 * pnht) * (cores_per_head - 1)) * stat + out * stat;  // statistics, tree, out_o
  if (!cfg.attention_sink.empty()) b += pnht * stat;
  return b + out * tile_bytes(cfg.compute.output);
}

}  // namespace

int64_t sdpa_decode_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, int64_t k_chunk,
                             const SdpaDecodeConfig& cfg) {
  // vdht: V's and the output's tiles per row (MLA: head_dim_v / 32).
  const int64_t dht = q.pcols / kTile, sk = (k_chunk + kTile - 1) / kTile;
  const int64_t vdht = cfg.head_dim_v > 0 ? cfg.head_dim_v / kTile : dht;
  const int64_t im = tile_bytes(cfg.compute.fp32_dest_acc_en ? DataFormat::Float32 : DataFormat::Bfloat16);
  int64_t b = dht * tile_bytes(q.format) + 2 * sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format));
  b += sk * im + 3 * vdht * im + 8 * im + vdht * tile_bytes(cfg.compute.output);
  return b;
}

TileTensor run_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                           const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                           const SdpaDecodeConfig& cfg) {
  return run_sdpa_decode(dev, q, k, v, nullptr, cur_pos, page_table, cfg);
}

TileTensor run_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                           const TileTensor* mask, const std::vector<int64_t>& cur_pos,
                           const std::vector<std::vector<int64_t>>* page_table, const SdpaDecodeConfig& cfg) {
  const bool mla = cfg.head_dim_v > 0;
  const std::string op = sdpa_decode_program(page_table != nullptr, mla);
  TtDevice::OpTimer timer(dev, op);
  const bool latest = cfg.compute.tt_metal == TtMetal::Latest;
  const int64_t block = page_table && latest ? k.prows : k.shape[2];
  const int64_t S = page_table ? block * static_cast<int64_t>((*page_table)[0].size()) : k.shape[2];
  const int64_t pos0 = !cfg.is_causal     ? S - 1
                       : cur_pos.empty()   ? 0
                       : page_table        ? sdpa_decode_padded_position(cur_pos[0], k.shape[2])
                                           : cur_pos[0];
  const int64_t chunk = sdpa_decode_k_chunk_size(cfg, S, page_table != nullptr, pos0);
  const int64_t cb = latest ? cb_bytes_latest(q, k, v, mask, chunk,
                                              sdpa_decode_grid(cfg, q.shape[1], k.shape[1]).cores_per_head, cfg)
                            : sdpa_decode_cb_bytes(q, k, v, chunk, cfg);
  check_cb_budget(dev, op, cb,
                  latest ? "a smaller k_chunk_size or max_cores_per_head_batch (the tree's receive buffer) fits"
                         : "a smaller k_chunk_size fits");
  // The caches are the model's resident buffers; the op allocates only its
  // output, which the next op's memory check counts.
  std::vector<const TileTensor*> ins = {&q, &k};
  if (!mla) ins.push_back(&v);
  if (mask) ins.push_back(mask);
  dev.program(op, program_key(cfg) + (mla ? ",head_dim_v=" + std::to_string(cfg.head_dim_v) : ""), ins);
  if (latest) {
    // How exp_approx_mode reaches the statistics at latest (item 6 of issue 27).
    dev.note(std::string("exp_approx_mode=") + (cfg.exp_approx_mode ? "true" : "false") +
             " gives SDPA decode's exp(m_old - m_new) the " + (cfg.exp_approx_mode ? "accurate" : "polynomial") +
             " exp at tt_metal latest (inverted at the first-column sites, tt-metal PR #56925); the tree merge's "
             "exps are accurate whatever the flag");
    // The device's wrong result that the emulation does not reproduce
    // (docs/TTSIM-STUDY.md: tt-sim models the arithmetic, not Dst capacity).
    if (cfg.compute.fp32_dest_acc_en && sdpa_decode_grid(cfg, q.shape[1], k.shape[1]).cores_per_head > 1)
      dev.note("SDPA decode's tree merge at tt_metal latest loads a fifth Dst tile that an fp32 half-sync Dst "
               "lacks (tt-metal #56171, fixed after this revision by PR #56225): the device's merged result is "
               "wrong there; tt-sim gives the merge's arithmetic");
  }
  return tt_sdpa_decode(q, k, v, mask, cur_pos, page_table, cfg, dev.exec());
}

}  // namespace mha::ttsim
