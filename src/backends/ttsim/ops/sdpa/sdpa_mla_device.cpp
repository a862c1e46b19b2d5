// flash_mla_prefill: multi-head latent attention's prefill, which TT-NN runs
// as the SDPA device operation with use_mla and head_dim_v (tt-metal's
// ExecuteFlashMLAPrefill calls ScaledDotProductAttention{.use_mla = true,
// .head_dim_v} on {Q, K}; docs/TTSIM.md "Flash MLA"). The compute kernel is
// the one SDPA's factory picks for the profile (sdpa_program) with V's tile
// columns vDHt = head_dim_v / 32; what is new is what the reader does: V is
// K's buffer, its first vDHt tiles of each tile row (15a15bf5's
// reader_interleaved_metal2.cpp with mla_kv_overlap: skip_src_cols = DHt -
// vDHt).
#include <algorithm>

#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

[[noreturn]] void refuse(const std::string& why) { throw InputError("flash-mla-prefill: " + why); }

}  // namespace

TileTensor mla_value_of_key(const TileTensor& k, int64_t head_dim_v) {
  TileTensor v = make_tile_tensor({k.shape[0], k.shape[1], k.shape[2], head_dim_v}, k.format);
  // Whole rows of whole tiles: a block-float face row (16 values) lies in
  // one tile column, so every value keeps its shared exponent.
  for (int64_t b = 0; b < k.batch; ++b)
    for (int64_t r = 0; r < k.prows; ++r)
      std::copy(k.matrix(b) + r * k.pcols, k.matrix(b) + r * k.pcols + v.pcols, v.matrix(b) + r * v.pcols);
  return v;
}

namespace {

// head_dim_v as the reader takes it: whole tiles of K, at most its width.
void check_head_dim_v(const char* op, const TileTensor& q, const TileTensor& k, int64_t dv) {
  if (q.shape.size() != 4 || k.shape.size() != 4)
    throw InputError(std::string(op) + ": expected Q (b, nqh, s, dh) and K (b or blocks, nkv, s, dh), 4-D each, "
                     "found Q " + shape_str(q.shape) + ", K " + shape_str(k.shape));
  if (dv < 1 || dv % kTile != 0 || dv > q.shape[3] || dv > k.shape[3])
    throw InputError(std::string(op) + ": head_dim_v: expected a multiple of 32 (the reader takes V as whole tiles "
                     "of K) at most Q's and K's head dim " + std::to_string(std::min(q.shape[3], k.shape[3])) +
                     ", found " + std::to_string(dv));
}

}  // namespace

void validate_flash_mla_prefill(const TileTensor& q, const TileTensor& k, const TileTensor* mask,
                                const SdpaConfig& cfg) {
  // SDPA's own rules for the program the factory picks: at latest a
  // float32 Q (scalar_df Float32) and lengths padded to whole chunks.
  const SdpaProgram program = sdpa_program(cfg);
  for (const TileTensor* t : {&q, &k, mask})
    if (t && t->format == DataFormat::Float32 && (t != &q || program == SdpaProgram::Kernel2024))
      refuse(std::string(t == &q ? "Q" : t == &k ? "K" : "MASK") +
             " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b" +
             (t == &q ? " (a float32 Q runs at tt_metal latest)" : ""));
  check_head_dim_v("flash-mla-prefill", q, k, cfg.head_dim_v);
  if (program == SdpaProgram::Standard && !sdpa_standard_gap(cfg).empty())
    refuse(sdpa_standard_gap(cfg) + "; run it with tt_metal=2024");
  const Shape vs{k.shape[0], k.shape[1], k.shape[2], cfg.head_dim_v};
  const Shape* ms = mask ? &mask->shape : nullptr;
  const std::string p = program == SdpaProgram::Streaming  ? sdpa_streaming_problem(q.shape, k.shape, vs, ms, cfg)
                        : program == SdpaProgram::Standard ? sdpa_padded_problem(q.shape, k.shape, vs, ms, cfg)
                                                           : sdpa_problem(q.shape, k.shape, vs, ms, cfg);
  if (!p.empty()) refuse(p);
}

TileTensor run_flash_mla_prefill(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                                 const TileTensor* mask, const SdpaConfig& cfg) {
  validate_flash_mla_prefill(q, k, mask, cfg);
  const TileTensor v = mla_value_of_key(k, cfg.head_dim_v);
  std::vector<const TileTensor*> ins = {&q, &k};
  if (mask) ins.push_back(mask);
  // The program's buffers with V's and the output's tiles vDHt wide; the V
  // view is no buffer of its own (the reader reads K's tiles).
  const SdpaProgram program = sdpa_program(cfg);
  const int64_t cb = sdpa_program_cb_bytes(program, q, k, v, mask, cfg);
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg) + ",head_dim_v=" + std::to_string(cfg.head_dim_v), ins,
                 sdpa_out_shape(q, v), cfg.compute.output, cb);
  sdpa_note_flags(dev, cfg, k.shape[2], mask != nullptr);
  TileTensor out;
  sdpa_program_run(program, q, k, v, mask, out, cfg, dev.exec());
  return out;
}

TileTensor run_chunked_flash_mla_prefill(TtDevice& dev, const std::string& op, const TileTensor& q,
                                        const TileTensor& k, const PageTable& page_table, int64_t chunk_start,
                                        const SdpaConfig& cfg) {
  check_head_dim_v("chunked-flash-mla-prefill", q, k, cfg.head_dim_v);
  // The paged cache's V view: each block's rows cut to head_dim_v, so the
  // reader's gather through the page table takes K's values.
  return run_chunked_sdpa(dev, op, q, k, mla_value_of_key(k, cfg.head_dim_v), page_table, chunk_start, cfg);
}

}  // namespace mha::ttsim
