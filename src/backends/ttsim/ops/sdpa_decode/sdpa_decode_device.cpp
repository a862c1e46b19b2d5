#include "backends/ttsim/ops/sdpa_decode/sdpa_decode.h"

namespace mha::ttsim {

const char* sdpa_decode_program(bool paged, bool mla) {
  if (mla)
    return paged ? "ttnn.transformer.paged_flash_multi_latent_attention_decode"
                 : "ttnn.transformer.flash_multi_latent_attention_decode";
  return paged ? "ttnn.transformer.paged_scaled_dot_product_attention_decode"
               : "ttnn.transformer.scaled_dot_product_attention_decode";
}

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
  const bool mla = cfg.head_dim_v > 0;
  const std::string op = sdpa_decode_program(page_table != nullptr, mla);
  // Issue 27 item 4: the decode kernel at `latest` (merge exp, half-tile Q,
  // explicit mask, block padding) is not emulated yet.
  if (cfg.compute.tt_metal != TtMetal::R2024)
    refuse_unmodelled(mla ? "flash-mla-decode" : "sdpa-decode", "the decode kernel (sdpa_flash_decode.cpp)",
                      cfg.compute.tt_metal);
  TtDevice::OpTimer timer(dev, op);
  const int64_t S = page_table ? k.shape[2] * static_cast<int64_t>((*page_table)[0].size()) : k.shape[2];
  const int64_t chunk = sdpa_decode_k_chunk_size(cfg, S, page_table != nullptr, cur_pos.empty() ? 0 : cur_pos[0]);
  const int64_t cb = sdpa_decode_cb_bytes(q, k, v, chunk, cfg);
  check_cb_budget(dev, op, cb, "a smaller k_chunk_size fits");
  // The caches are the model's resident buffers; the op allocates only its
  // output, which the next op's memory check counts.
  dev.program(op, program_key(cfg) + (mla ? ",head_dim_v=" + std::to_string(cfg.head_dim_v) : ""),
              mla ? std::vector<const TileTensor*>{&q, &k} : std::vector<const TileTensor*>{&q, &k, &v});
  return tt_sdpa_decode(q, k, v, cur_pos, page_table, cfg, dev.exec());
}

}  // namespace mha::ttsim
