// Chunked prefill: the SDPA device operation with a page table (tt-metal's
// is_chunked program). The compute kernel is the one SDPA's factory picks
// for the profile (sdpa_program), the chunk's offset moving its causal
// bounds; what is new here is what the reader does: it fetches K and V
// through the page table.
#include <algorithm>

#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// The op's name in messages: chunked_flash_mla_prefill is the same
// operation with use_mla (head_dim_v).
std::string op_name(const SdpaConfig& cfg) {
  return cfg.head_dim_v > 0 ? "chunked-flash-mla-prefill" : "chunked-sdpa";
}

// The paged operands' shapes and the page table against Q, one line each
// (TT-NN's chunked-mode checks, and the reader's whole-tile blocks). With
// use_mla, V is K's first head_dim_v columns.
void check_paged(const TileTensor& q, const TileTensor& k, const TileTensor& v, const PageTable& pt,
                 int64_t chunk_start, const SdpaConfig& cfg) {
  auto refuse = [&](const std::string& why) { throw InputError(op_name(cfg) + ": " + why); };
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
    refuse("expected Q (b, nqh, s, dh) and the paged K, V (blocks, nkv, block_size, dh), 4-D each, found Q " +
           shape_str(q.shape) + ", K " + shape_str(k.shape) + ", V " + shape_str(v.shape));
  const Shape vs = cfg.head_dim_v > 0 ? Shape{k.shape[0], k.shape[1], k.shape[2], cfg.head_dim_v} : k.shape;
  if (vs != v.shape) refuse("expected K and V of one shape, found K " + shape_str(k.shape) + " and V " +
                            shape_str(v.shape));
  if (k.shape[3] != q.shape[3])
    refuse("K and V's head dim " + std::to_string(k.shape[3]) + " differs from Q's " + std::to_string(q.shape[3]));
  if (k.shape[2] % kTile != 0)
    refuse("block_size (K's dim 2) " + std::to_string(k.shape[2]) + " is not a multiple of 32 (the reader reads "
           "whole tiles of a block)");
  if (static_cast<int64_t>(pt.size()) != q.shape[0])
    refuse("the page table has " + std::to_string(pt.size()) + " rows, expected one per user (Q's batch " +
           std::to_string(q.shape[0]) + ")");
  const int64_t kv_len = static_cast<int64_t>(pt.front().size()) * k.shape[2];
  if (chunk_start < 0) refuse("chunk_start_idx: expected a position >= 0, found " + std::to_string(chunk_start));
  if (kv_len < chunk_start + q.shape[2])
    refuse("the page table maps " + std::to_string(kv_len) + " positions per user, fewer than chunk_start_idx + s = " +
           std::to_string(chunk_start + q.shape[2]));
  for (size_t u = 0; u < pt.size(); ++u)
    for (size_t j = 0; j < pt[u].size(); ++j)
      if (pt[u][j] >= k.shape[0])
        refuse("page_table[" + std::to_string(u) + ", " + std::to_string(j) + "] = " + std::to_string(pt[u][j]) +
               " is outside the cache's " + std::to_string(k.shape[0]) + " blocks");
}

// The keys of every user as the reader fetches them: position p < valid
// from block page_table[u][p / block_size], row p % block_size; positions
// from valid to the last k chunk's end are zero (the reader's padding; the
// causal mask hides them). Whole rows move, so a block-float row keeps its
// shared exponents: the values are the cache's exactly.
TileTensor gather_keys(const TileTensor& paged, const PageTable& pt, int64_t valid, int64_t len) {
  const int64_t nkv = paged.shape[1], bs = paged.shape[2], w = paged.pcols;
  TileTensor out = make_tile_tensor({static_cast<int64_t>(pt.size()), nkv, len, paged.shape[3]}, paged.format);
  for (size_t u = 0; u < pt.size(); ++u)
    for (int64_t h = 0; h < nkv; ++h)
      for (int64_t p = 0; p < valid; ++p) {
        const float* row = paged.matrix(pt[u][static_cast<size_t>(p / bs)] * nkv + h) + (p % bs) * w;
        std::copy(row, row + w, out.matrix(static_cast<int64_t>(u) * nkv + h) + p * w);
      }
  return out;
}

}  // namespace

void validate_chunked_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const PageTable& pt,
                           int64_t chunk_start, const SdpaConfig& cfg) {
  auto refuse = [&](const std::string& why) { throw InputError(op_name(cfg) + ": " + why); };
  // Plain and MLA chunked prefill run on the program the factory picks at
  // either profile (use_mla changes what the reader fetches as V, not the
  // kernel).
  for (const TileTensor* t : {&q, &k, &v})
    if (t->format == DataFormat::Float32)
      refuse(std::string(t == &q ? "Q" : t == &k ? "K" : "V") +
             " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b");
  if (pt.empty() || pt.front().empty()) refuse("the page table is empty; expected [b, blocks per user] block ids");
  check_paged(q, k, v, pt, chunk_start, cfg);
  const int64_t kc = std::max<int64_t>(cfg.k_chunk_size, 1);
  const int64_t len = (chunk_start + q.shape[2] + kc - 1) / kc * kc;
  const Shape gathered{q.shape[0], k.shape[1], len, k.shape[3]}, gathered_v{q.shape[0], k.shape[1], len, v.shape[3]};
  // The program's own rules on top (at latest: the streaming kernel's head
  // dim, the fp32-Dst kernel's gaps).
  const SdpaProgram program = sdpa_program(cfg);
  const std::string p = program == SdpaProgram::Streaming
                            ? sdpa_streaming_problem(q.shape, gathered, gathered_v, nullptr, cfg, chunk_start)
                            : sdpa_problem(q.shape, gathered, gathered_v, nullptr, cfg, chunk_start);
  if (!p.empty()) refuse(p);
  if (program == SdpaProgram::Standard) {
    const std::string gap = sdpa_standard_gap(cfg);
    if (!gap.empty()) refuse(gap + "; run it with tt_metal=2024");
  }
}

TileTensor run_chunked_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                            const TileTensor& v, const PageTable& pt, int64_t chunk_start, const SdpaConfig& cfg) {
  validate_chunked_sdpa(q, k, v, pt, chunk_start, cfg);
  const int64_t valid = chunk_start + q.shape[2];
  const int64_t len = (valid + cfg.k_chunk_size - 1) / cfg.k_chunk_size * cfg.k_chunk_size;
  const TileTensor kg = gather_keys(k, pt, valid, len), vg = gather_keys(v, pt, valid, len);
  // SDPA's buffers, and one page-table row (int32 ids, a 32-byte aligned stick).
  const int64_t stick = (static_cast<int64_t>(pt.front().size()) * 4 + 31) / 32 * 32;
  const SdpaProgram program = sdpa_program(cfg);
  const int64_t cb = sdpa_program_cb_bytes(program, q, kg, vg, nullptr, cfg) + stick;
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg), {&q, &k, &v}, q.shape, cfg.compute.output, cb);
  sdpa_note_flags(dev, cfg, valid, false);
  TileTensor out;
  sdpa_program_run(program, q, kg, vg, nullptr, out, cfg, dev.exec(), chunk_start);
  return out;
}

}  // namespace mha::ttsim
