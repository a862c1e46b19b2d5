#pragma once
// ttnn.transformer.scaled_dot_product_attention on the emulated device. Its
// attributes are SdpaConfig (sdpa_kernel.h: the program config, causal
// flag, scale, window, sink, the compute config embedded, one field list).
#include <string>
#include <vector>

#include "backends/ttsim/ops/device_op.h"
#include "backends/ttsim/ops/sdpa/sdpa_kernel.h"

namespace mha::ttsim {

// TT-NN's checks, InputError "sdpa: why" (shapes, chunk sizes, dtypes).
void validate_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                   const SdpaConfig& cfg);

// Circular buffers per core as the program factory sizes them (Q chunk, K
// and V chunks double-buffered, mask, qk, out_im, out_acc, out, statistics).
int64_t sdpa_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      const SdpaConfig& cfg);

// The program the factory picks. tt_metal latest (15a15bf5): the streaming
// kernel with a 16-bit Dst, compute_common.hpp's sdpa_standard with an fp32
// one (docs/TTSIM.md "tt-metal revisions"); 2024's kernel never stands in
// for either. Plain and chunked SDPA share it, as they share the factory.
enum class SdpaProgram { Kernel2024, Standard, Streaming };
SdpaProgram sdpa_program(const SdpaConfig& cfg);
// That program's circular buffers per core.
int64_t sdpa_program_cb_bytes(SdpaProgram program, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                              const TileTensor* mask, const SdpaConfig& cfg);
// That program's compute kernel (chunk_start as tt_sdpa's), on ex.
void sdpa_program_run(SdpaProgram program, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                      const TileTensor* mask, TileTensor& out, const SdpaConfig& cfg, const Exec& ex,
                      int64_t chunk_start = 0);

// validate, the frame (device_op.h), the program the factory picks for
// the profile (2024's kernel; at latest the streaming kernel with a 16-bit
// Dst, sdpa_standard with an fp32 one): [b, nqh, s, dh] in
// cfg.compute.output. At latest a given mask first goes through the
// ttnn.multiply by 1 / scale that TT-NN's op runs (the kernels scale it
// with the scores).
TileTensor run_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                    const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg);

// ttnn.transformer.chunked_scaled_dot_product_attention: as in tt-metal, the
// SDPA device operation given a page table and chunk_start_idx (the
// program's is_chunked path; docs/TTSIM.md, "Chunked prefill"). Q
// (b, nqh, s, dh) holds the positions [chunk_start, chunk_start + s) of
// each user's sequence; K and V are the paged cache (blocks, nkv,
// block_size, dh), user u's position p in block page_table[u][p /
// block_size]. Causal over every key up to the query's position; cfg's
// is_causal, window and sink keep their defaults. The page table and the
// chunk start are runtime arguments: they do not key the program.
using PageTable = std::vector<std::vector<int64_t>>;

// TT-NN's checks, InputError "chunked-sdpa: why" (dtypes, the paged
// shapes, the page table against the batch and the cache, the chunk start
// against the chunk sizes and the cache's length).
void validate_chunked_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const PageTable& page_table,
                           int64_t chunk_start, const SdpaConfig& cfg);

// validate, the keys gathered as the reader fetches them, the frame, the
// kernel: [b, nqh, s, dh] in cfg.compute.output.
TileTensor run_chunked_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                            const TileTensor& v, const PageTable& page_table, int64_t chunk_start,
                            const SdpaConfig& cfg);

// The one-line notes (TtDevice::note) where the kernel the factory picks
// for cfg ignores or inverts a flag (exp_approx_mode), or where it gives a
// wrong result tt-sim reproduces (a given mask over K's partial last tile
// of s_k keys: sdpa_padded_mask_note).
void sdpa_note_flags(TtDevice& dev, const SdpaConfig& cfg, int64_t s_k, bool has_mask);

// ttnn.transformer.flash_mla_prefill: as in tt-metal, the SDPA device
// operation with use_mla and head_dim_v = cfg.head_dim_v (docs/TTSIM.md
// "Flash MLA"): Q (b, nqh, s, dh) against K (b, nkv, s_k, dh), the latent
// rows [c | k_rope] of multi-head latent attention's absorbed form, and V
// the first head_dim_v columns of K, which the reader takes from K's
// tiles. Out: (b, nqh, s, head_dim_v) in cfg.compute.output, by the
// program the factory picks for the profile (sdpa_program).

// V as the reader fetches it: K's first head_dim_v columns (whole tiles,
// so block-float values keep their shared exponents).
TileTensor mla_value_of_key(const TileTensor& k, int64_t head_dim_v);

// TT-NN's checks and the kernel's, InputError "flash-mla-prefill: why".
void validate_flash_mla_prefill(const TileTensor& q, const TileTensor& k, const TileTensor* mask,
                                const SdpaConfig& cfg);

// validate, the frame (program keyed on head_dim_v too), SDPA's program.
TileTensor run_flash_mla_prefill(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                                 const TileTensor* mask, const SdpaConfig& cfg);

// ttnn.transformer.chunked_flash_mla_prefill: chunked prefill (as
// run_chunked_sdpa) with use_mla, V the first cfg.head_dim_v columns of the
// paged latent cache K [blocks, nkv, block_size, dh]. Out: (b, nqh, s,
// head_dim_v).
TileTensor run_chunked_flash_mla_prefill(TtDevice& dev, const std::string& op, const TileTensor& q,
                                        const TileTensor& k, const PageTable& page_table, int64_t chunk_start,
                                        const SdpaConfig& cfg);

}  // namespace mha::ttsim
