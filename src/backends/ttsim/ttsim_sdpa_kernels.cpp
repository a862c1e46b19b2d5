#include "backends/ttsim/ttsim_sdpa_kernels.h"

#include <algorithm>

#include "backends/ttsim/ttsim_matmul_program.h"
#include "ttsim/kv_cache.h"
#include "ttsim/rotary_llama.h"
#include "ttsim/sdpa.h"
#include "ttsim/sdpa_decode.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

std::string cfg_key(const ComputeConfig& c) {
  return std::string(fidelity_name(c.math_fidelity)) + ",fp32_acc=" + (c.fp32_dest_acc_en ? "1" : "0") +
         ",approx=" + (c.math_approx_mode ? "1" : "0") + ",out=" + format_name(c.output);
}

}  // namespace

TileTensor k_linear(TtDevice& dev, const char* op, const TileTensor& x, const TileTensor& w, const ComputeConfig& cfg,
                    Grid grid, const MatmulBlocking* blk) {
  if (!blk) return op_matmul(dev, op, x, w, cfg, grid, /*core_grid=*/false);
  const double macs = static_cast<double>(x.batch) * x.prows * x.pcols * w.pcols * fidelity_phase_count(cfg.math_fidelity);
  TtDevice::OpTimer timer(dev, op, macs);
  dev.program(op, cfg_key(cfg) + ",program_config=2D,in0_block_w=" + std::to_string(blk->in0_block_w), {&x, &w});
  Shape out_shape = x.shape;
  out_shape.back() = w.cols;
  dev.check_memory(op, {&x, &w}, out_shape, cfg.output);
  TileTensor out;
  tt_matmul(x, w, out, cfg, dev.exec(), *blk);
  return out;
}

TileTensor k_typecast(TtDevice& dev, const TileTensor& x, DataFormat out) {
  if (x.format == out) return x;
  return op_move(dev, "ttnn.typecast", x, to_row_major(x), x.shape, out);
}

TileTensor k_rotary_llama(TtDevice& dev, const TileTensor& x, const TileTensor& cos, const TileTensor& sin,
                          const TileTensor& trans, const ComputeConfig& cfg, bool decode_mode) {
  const char* op = "ttnn.experimental.rotary_embedding_llama";
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, cfg_key(cfg) + (decode_mode ? ",is_decode_mode=1" : ",is_decode_mode=0"), {&x, &cos, &sin, &trans});
  dev.check_memory(op, {&x, &cos, &sin, &trans}, x.shape, cfg.output);
  return tt_rotary_llama(x, cos, sin, trans, decode_mode ? RotaryMode::Decode : RotaryMode::Prefill, cfg, dev.exec());
}

void k_fill_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, int64_t batch_idx) {
  const char* op = "ttnn.fill_cache";
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, "", {&cache, &x});
  tt_fill_cache(cache, x, batch_idx, /*update_idx=*/0, CacheWriteConfig{});
}

void k_update_cache(TtDevice& dev, TileTensor& cache, const TileTensor& x, const std::vector<int64_t>& cur_pos) {
  const char* op = "ttnn.experimental.paged_update_cache";
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, "", {&cache, &x});
  tt_paged_update_cache(cache, x, cur_pos, nullptr, CacheWriteConfig{});
}

TileTensor k_sdpa(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v, float scale,
                  int64_t chunk, bool exp_approx, int64_t window, const ComputeConfig& cfg) {
  const char* op = "ttnn.transformer.scaled_dot_product_attention";
  TtDevice::OpTimer timer(dev, op);
  dev.program(op,
              cfg_key(cfg) + ",chunk=" + std::to_string(chunk) + ",exp_approx=" + (exp_approx ? "1" : "0") +
                  ",window=" + std::to_string(window),
              {&q, &k, &v});
  dev.check_memory(op, {&q, &k, &v}, q.shape, cfg.output);
  SdpaConfig c;
  c.q_chunk_size = c.k_chunk_size = std::min(chunk, q.prows);
  c.exp_approx_mode = exp_approx;
  c.is_causal = true;
  c.sliding_window_size = window;
  c.scale = scale;
  c.math_fidelity = cfg.math_fidelity;
  c.fp32_dest_acc_en = cfg.fp32_dest_acc_en;
  c.arch = cfg.arch;
  c.math_approx_mode = cfg.math_approx_mode;
  c.output = cfg.output;
  c.bfp8_pack_precise = cfg.bfp8_pack_precise;
  TileTensor out;
  tt_sdpa(q, k, v, nullptr, out, c, dev.exec());
  return out;
}

TileTensor k_sdpa_decode(TtDevice& dev, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                         const std::vector<int64_t>& cur_pos, float scale, Grid grid, int64_t k_chunk,
                         int64_t window, const ComputeConfig& cfg) {
  const char* op = "ttnn.transformer.scaled_dot_product_attention_decode";
  TtDevice::OpTimer timer(dev, op);
  dev.program(op, cfg_key(cfg) + ",k_chunk=" + std::to_string(k_chunk) + ",window=" + std::to_string(window),
              {&q, &k, &v});
  SdpaDecodeConfig c;
  c.k_chunk_size = k_chunk;
  c.sliding_window_size = window;
  c.exp_approx_mode = false;  // SDPA_DECODE_PROGCFG
  c.math_fidelity = cfg.math_fidelity;
  c.math_approx_mode = cfg.math_approx_mode;
  c.fp32_dest_acc_en = cfg.fp32_dest_acc_en;
  c.arch = cfg.arch;
  c.grid_x = grid.x;
  c.grid_y = grid.y;
  c.scale = scale;
  c.output = cfg.output;
  return tt_sdpa_decode(q, k, v, cur_pos, nullptr, c, dev.exec());
}

}  // namespace mha::ttsim
