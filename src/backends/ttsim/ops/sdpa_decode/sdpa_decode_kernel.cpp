#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "ttsim/packer.h"
#include "backends/ttsim/ops/sdpa/sdpa_common.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr int kMaxRounds = 6;  // the kernel's MAX_TREE_REDUCTION_ROUNDS (64 cores per head)

// One core's running state: max and sum per q row (G), output G x dv; every
// value a bfloat16 circular-buffer value.
struct Partial {
  bool has_data = false;
  std::vector<float> m, l, o;
};

// The kernel's compute config (tm: the shared SDPA steps of sdpa_common.h,
// lane models or vector kernels) and the op's shape.
struct Ctx {
  const SdpaDecodeConfig& cfg;
  TileMath tm;
  float scale, scale_bf16;  // fp32 scale (scores' exp), bf16-cut scale (statistics)
  bool fp32;
  int64_t G, dh, dv, C;  // q rows per kv head, Q/K head dim (padded), V's (MLA: head_dim_v), chunk length
  bool latest;           // tt_metal latest: compute_common.hpp's 637d956c helpers
};

// A Dst value packed to a bfloat16 circular buffer.
float pack_bf16(float dst, const Ctx& c) {
  sdpa_pack_bf16(&dst, 1, c.tm);
  return dst;
}

// exp(d * scale) as the statistics helpers compute it on the SFPU
// (sub_exp_block, the fused correction; compute_common.hpp
// _calculate_exponential_piecewise_ with SCALE_EN): d times the scale cut to
// bf16 (scale_fp32 >> 16) on SFPMUL, then with exp_approx_mode the approx exp
// (below -42 gives 0), else exp_21f (16-bit Dst) or the fp32 exp. The LReg
// value, before any store.
float stat_exp_lane(float d, const Ctx& c) {
  const Arch a = c.tm.arch;
  const float x = sfpu_mul(d, c.scale_bf16, a);
  if (c.cfg.exp_approx_mode) return sfpu_exp_lane(x, ExpAlgorithm::Approx, a);
  return sfpu_exp_lane(x, c.fp32 ? ExpAlgorithm::AccurateFp32 : ExpAlgorithm::Accurate21f, a);
}

// sub_exp_block: ELWSUB of the two bf16 operands into Dst, the statistics
// exp on the SFPU, stored to Dst and packed to bf16. At latest the exp is
// exp_tile_first_column<EXP_APPROX_MODE>: accurate when the flag is on,
// the polynomial when off (inverted: tt-metal PR #56925).
float sub_exp_stat(float a, float b, const Ctx& c) {
  const float d = fpu_add(a, -b, c.fp32, c.tm.arch);
  if (c.latest) return pack_bf16(sdpa_exp_first_column(d, c.scale_bf16, c.cfg.exp_approx_mode, c.fp32, c.tm.arch), c);
  return pack_bf16(sfpu_store(stat_exp_lane(d, c), c.fp32), c);
}

// correction_block's two exps (lane values): at latest its fused SFPU
// function (calculate_fused_max_sub_exp_add_tile) always takes
// _ckernel_sfpu_exp_accurate_, whatever exp_approx_mode says.
float merge_exp_lane(float d, const Ctx& c) {
  return c.latest ? sdpa_exp_accurate_scaled(d, c.scale_bf16, c.fp32, c.tm.arch) : stat_exp_lane(d, c);
}

// The scores' exp in sub_exp_block_bcast_cols_inplace: ELWSUB of the row max
// (broadcast over columns) into Dst, exp_tile<true, true> with the fp32 scale
// folded into the fast approx constants, stored and packed to bf16.
// (sdpa_common.h's sdpa_sub_exp is the prefill kernel's unscaled exp.)
// At latest (InputClamping::None) the packer's ReLU zeroes negative outputs,
// which the clamped model gives as 0 already: only the sign of a zero moves.
float sub_exp_scores(float s, float m, const Ctx& c) {
  float y = sfpu_store(sfpu_exp_fast_approx_scaled(fpu_add(s, -m, c.fp32, c.tm.arch), c.scale, c.tm.arch), c.fp32);
  if (c.latest && std::signbit(y)) y = 0.0f;
  return pack_bf16(y, c);
}

// tree_reduction.hpp's binary tree over N ranks (rank 0 the root): the child
// rank received at each round, kNone where there is none.
void tree_children(uint32_t rank, uint32_t N, uint32_t children[kMaxRounds]) {
  for (int r = 0; r < kMaxRounds; ++r) children[r] = kNone;
  if (N <= 1) return;
  const uint32_t vid = (N - 1) - rank, rounds = 32 - __builtin_clz(N - 1);
  for (uint32_t r = 0; r < rounds; ++r) {
    const uint32_t mask = (2u << r) - 1;
    if ((vid & mask) == mask && vid - (1u << r) < N) children[r] = (N - 1) - (vid - (1u << r));
  }
  if (rank == 0)  // orphans (their natural parent is past N) report to the root
    for (uint32_t c = 1; c < N; ++c) {
      const uint32_t cv = (N - 1) - c, t = __builtin_ctz(~cv);
      if (cv + (1u << t) >= N && children[t] == kNone) children[t] = c;
    }
}

// rt_args_common.hpp get_workload_for_core without a sliding window: chunks
// [start, end) of core `core` among N, dealt from the end (core 0 = last).
void core_chunks(int64_t num_chunks, int64_t core, int64_t N, int64_t& start, int64_t& end) {
  if (N > num_chunks) {
    const int64_t per = core < num_chunks ? 1 : 0;
    start = (num_chunks - core - 1) * per;
    end = (num_chunks - core) * per;
    return;
  }
  const int64_t per = num_chunks / N, res = num_chunks % N, rev = N - core - 1;
  start = rev * per + std::min(res, rev);
  end = start + per + (rev < res ? 1 : 0);
}

// What a core adds to a chunk's scores before the row max, in the kernel's
// order: the block-padding mask on every chunk (paged blocks under 32 rows:
// -inf on each tile's rows past the block), the causal mask on the range's
// last chunk (-inf past cur_pos, which core 0 owns) or the user's mask on
// every chunk, then the window's mask on its first chunk (-inf below
// window_start > 0). Each is add_block_inplace: ELWADD, packed.
struct ChunkMasks {
  int64_t first = 0, last = 0;  // the range's chunks (absolute indices)
  int64_t cur_pos = 0;          // in the kernel's (padded) positions
  bool causal = true;
  int64_t window_start = 0;
  int64_t block = 0;              // original_block_size under 32, else 0
  const float* user = nullptr;    // row r's mask at user + r * user_ld, position p at column p
  int64_t user_ld = 0;
};

// Reused buffers of one worker thread (cores run one after another on it).
struct DecodeScratch {
  SdpaScratch mm;  // the shared matmul / reduce steps' work space
  std::vector<float> qk, p, mask, cur_max, sums, pv, kchunk, vchunk;
};

void add_masks(const Ctx& c, int64_t j, const ChunkMasks& mk, DecodeScratch& s) {
  const int64_t C = c.C, G = c.G;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  s.mask.resize(static_cast<size_t>(C));
  auto add_generated = [&](const auto& masked) {
    for (int64_t x = 0; x < C; ++x) s.mask[x] = masked(j * C + x) ? neg_inf : 0.0f;
    for (int64_t r = 0; r < G; ++r) sdpa_add(&s.qk[r * C], s.mask.data(), C, c.tm);
  };
  if (mk.block > 0) add_generated([&](int64_t p) { return p % kTile >= mk.block; });
  if (mk.causal && j == mk.last) add_generated([&](int64_t p) { return p > mk.cur_pos; });
  if (mk.user)
    for (int64_t r = 0; r < G; ++r) sdpa_add(&s.qk[r * C], mk.user + r * mk.user_ld + j * C, C, c.tm);
  if (j == mk.first && mk.window_start > 0) add_generated([&](int64_t p) { return p < mk.window_start; });
}

// The flash loop of one core over chunks [c0, c1) of one (user, kv head)
// (absolute chunk indices): q (G rows of dh, Q's format), K and V rows of
// position `pos` at kv_row(false/true, pos), the masks of mk.
void run_core(const Ctx& c, const float* q, const std::function<const float*(bool v, int64_t pos)>& kv_row,
              int64_t ld_kv, int64_t c0, int64_t c1, const ChunkMasks& mk, DecodeScratch& s, Partial& out) {
  const int64_t C = c.C, G = c.G, dh = c.dh, dv = c.dv;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  out.has_data = true;
  out.m.assign(static_cast<size_t>(G), neg_inf);
  out.l.assign(static_cast<size_t>(G), 0.0f);
  out.o.assign(static_cast<size_t>(G * dv), 0.0f);
  s.qk.resize(static_cast<size_t>(G * C));
  s.p.resize(static_cast<size_t>(G * C));
  s.cur_max.resize(static_cast<size_t>(G));
  s.sums.resize(static_cast<size_t>(G));
  s.pv.resize(static_cast<size_t>(G * dv));
  for (int64_t j = c0; j < c1; ++j) {
    // The chunk's K and V rows: read in place when they are consecutive in
    // memory (a contiguous cache, or a chunk inside one page), else gathered
    // page by page, as the reader kernel fetches them through the page table.
    const float* k0 = kv_row(false, j * C);
    const float* v0 = kv_row(true, j * C);
    if (kv_row(false, j * C + C - 1) != k0 + (C - 1) * ld_kv) {
      s.kchunk.resize(static_cast<size_t>(C * ld_kv));
      s.vchunk.resize(static_cast<size_t>(C * ld_kv));
      for (int64_t x = 0; x < C; ++x) {
        std::copy(kv_row(false, j * C + x), kv_row(false, j * C + x) + ld_kv, &s.kchunk[x * ld_kv]);
        std::copy(kv_row(true, j * C + x), kv_row(true, j * C + x) + ld_kv, &s.vchunk[x * ld_kv]);
      }
      k0 = s.kchunk.data();
      v0 = s.vchunk.data();
    }
    // QK = Q @ K_chunk^T (element (d, x) is row x's d), packed to bf16.
    sdpa_matmul(q, dh, G, dh, k0, 1, ld_kv, C, c.tm, s.mm, s.qk.data(), C);
    add_masks(c, j, mk, s);
    for (int64_t r = 0; r < G; ++r) {
      // reduce_c MAX over the chunk, then the eltwise max with the previous max.
      float m = sdpa_row_max(&s.qk[r * C], C);
      if (j > c0) m = std::max(m, out.m[r]);
      s.cur_max[r] = m;
      for (int64_t x = 0; x < C; ++x) s.p[r * C + x] = sub_exp_scores(s.qk[r * C + x], m, c);
    }
    // reduce_c SUM: the matrix unit against the 1.0 scaler, P in SrcA, packed.
    sdpa_row_sums(s.p.data(), C, G, C, c.tm, s.mm, s.sums.data());
    // OUT_IM = P @ V_chunk (V's first dv columns), packed to bf16.
    sdpa_matmul(s.p.data(), C, G, C, v0, ld_kv, 1, dv, c.tm, s.mm, s.pv.data(), dv);
    for (int64_t r = 0; r < G; ++r) {
      float* o = &out.o[r * dv];
      if (j == c0) {  // the first chunk's matmul writes the accumulator itself
        std::copy(&s.pv[r * dv], &s.pv[(r + 1) * dv], o);
        out.l[r] = s.sums[r];
        out.m[r] = s.cur_max[r];
        continue;
      }
      const float emd = sub_exp_stat(out.m[r], s.cur_max[r], c);  // EXP_MAX_DIFF = exp(PREV_MAX - CUR_MAX)
      const float prev_sum = sdpa_mul1(out.l[r], emd, c.tm);      // PREV_SUM *= EXP_MAX_DIFF
      sdpa_mul_bcast(o, dv, emd, c.tm);                           // OUT_ACC *= EXP_MAX_DIFF
      out.l[r] = sdpa_add1(s.sums[r], prev_sum, c.tm);            // CUR_SUM += PREV_SUM
      sdpa_add(o, &s.pv[r * dv], dv, c.tm);                       // OUT_ACC += OUT_IM
      out.m[r] = s.cur_max[r];
    }
  }
}

// correction_block (one fused SFPU function: max, both exps, both rescaled
// sums and their sum, every Dst write an SFPSTORE), then the output rescale
// and add on the FPU: the child's (m, l, o) merged into acc.
void merge_child(Partial& acc, const Partial& child, const Ctx& c) {
  const bool fp32 = c.fp32;
  std::vector<float> child_o(static_cast<size_t>(c.dv));
  for (int64_t r = 0; r < c.G; ++r) {
    const float m = std::max(acc.m[r], child.m[r]);
    const float e_prev = merge_exp_lane(sfpu_add(acc.m[r], -m, c.tm.arch), c);
    const float e_child = merge_exp_lane(sfpu_add(child.m[r], -m, c.tm.arch), c);
    const float l_child = sfpu_store(sfpu_mul(e_child, child.l[r], c.tm.arch), fp32);
    const float l_prev = sfpu_store(sfpu_mul(e_prev, acc.l[r], c.tm.arch), fp32);
    acc.l[r] = pack_bf16(sfpu_store(sfpu_add(l_child, l_prev, c.tm.arch), fp32), c);
    acc.m[r] = m;
    const float emd = pack_bf16(sfpu_store(e_prev, fp32), c), emd2 = pack_bf16(sfpu_store(e_child, fp32), c);
    float* o = &acc.o[r * c.dv];
    std::copy(&child.o[r * c.dv], &child.o[(r + 1) * c.dv], child_o.begin());  // OUT_ACC_2 <- CHILD_OUT
    sdpa_mul_bcast(o, c.dv, emd, c.tm);                                         // OUT_ACC *= EXP_MAX_DIFF
    sdpa_mul_bcast(child_o.data(), c.dv, emd2, c.tm);                           // OUT_ACC_2 *= EXP_MAX_DIFF_2
    sdpa_add(o, child_o.data(), c.dv, c.tm);                                    // OUT_ACC += OUT_ACC_2
  }
}

// A rank's state after receiving from its active children, round by round.
Partial reduce_rank(std::vector<Partial>& parts, uint32_t rank, uint32_t N, int64_t num_chunks, const Ctx& c) {
  Partial acc = std::move(parts[rank]);
  uint32_t children[kMaxRounds];
  tree_children(rank, N, children);
  for (int r = 0; r < kMaxRounds; ++r) {
    if (children[r] == kNone || static_cast<int64_t>(children[r]) >= num_chunks) continue;
    const Partial child = reduce_rank(parts, children[r], N, num_chunks, c);
    if (child.has_data) merge_child(acc, child, c);
  }
  return acc;
}

int64_t pow2_tiles_up_to(int64_t tiles, int64_t cap) {
  int64_t p = 1;
  while (p < tiles) p <<= 1;
  return std::min(p, cap);
}

}  // namespace

int64_t sdpa_decode_k_chunk_size(const SdpaDecodeConfig& cfg, int64_t S, bool paged, int64_t cur_pos) {
  if (cfg.k_chunk_size > 0) return cfg.k_chunk_size;
  if (paged) return pow2_tiles_up_to(cur_pos / kTile + 1, cfg.compute.fp32_dest_acc_en ? 4 : 8) * kTile;
  int64_t i = 1;
  while (i < S && S % (int64_t{1} << (i + 1)) == 0) ++i;
  return std::min<int64_t>(512, int64_t{1} << i);
}

int64_t sdpa_decode_padded_position(int64_t p, int64_t block_size) {
  return block_size > 0 && block_size < kTile ? p / block_size * kTile + p % block_size : p;
}

SdpaDecodeGrid sdpa_decode_grid(const SdpaDecodeConfig& cfg, int64_t batch, int64_t nkv) {
  const int64_t avail = int64_t{cfg.grid_x} * cfg.grid_y;
  const int64_t max_per_head = cfg.max_cores_per_head_batch > 0 ? cfg.max_cores_per_head_batch : avail;
  SdpaDecodeGrid g;
  g.cores_per_batch = std::min(avail, max_per_head * batch * nkv) / batch;
  g.cores_per_head = std::max<int64_t>(1, g.cores_per_batch / nkv);
  g.heads_per_core = std::max<int64_t>(1, (nkv + g.cores_per_batch - 1) / std::max<int64_t>(1, g.cores_per_batch));
  return g;
}

namespace {

// The features only the latest profile emulates, checked as TT-NN checks
// them (sdpa_decode_device_operation.cpp): the mask only non-causal, with a
// k_chunk_size dividing its length; the paged non-causal op with a chunk
// size; block padding only for a paged cache.
void check_latest_args(const TileTensor& q, const TileTensor& k, const TileTensor* mask, bool paged, int64_t S,
                       const std::vector<int64_t>& cur_pos, const SdpaDecodeConfig& cfg) {
  const bool latest = cfg.compute.tt_metal == TtMetal::Latest;
  const bool padded_blocks = k.shape[2] % kTile != 0;
  if (!latest && (!cfg.is_causal || mask || padded_blocks))
    throw InputError(std::string("sdpa_decode: ") +
                     (mask ? "an attention mask" : !cfg.is_causal ? "is_causal=false" : "a paged block size under 32") +
                     " is modelled at tt_metal latest only; run it with tt_metal=latest");
  if (padded_blocks && (!paged || k.shape[2] > kTile))
    throw InputError("sdpa_decode: K/V length " + std::to_string(k.shape[2]) +
                     " is not a multiple of 32 (only a paged cache's blocks may be shorter than 32)");
  if (!cfg.is_causal && !cur_pos.empty())
    throw InputError("sdpa_decode: cur_pos is for causal decode; is_causal=false attends the whole cache");
  if (!cfg.is_causal && paged && cfg.k_chunk_size == 0)
    throw InputError("sdpa_decode: the paged op with is_causal=false needs k_chunk_size > 0 (TT-NN's check)");
  if (!mask) return;
  if (cfg.is_causal)
    throw InputError("sdpa_decode: an attention mask needs is_causal=false (TT-NN refuses it on the causal op)");
  const Shape want{q.shape[1], 1, q.shape[2], S};
  if (mask->shape != want)
    throw InputError("sdpa_decode: the mask is " + shape_str(mask->shape) + ", expected " + shape_str(want) +
                     " ([b, 1, nh, S])");
  if (mask->format == DataFormat::Float32)
    throw InputError("sdpa_decode: the mask is float32; expected bfloat16, bfloat8_b or bfloat4_b");
  if (cfg.k_chunk_size == 0 || S % cfg.k_chunk_size != 0)
    throw InputError("sdpa_decode: an attention mask needs a k_chunk_size dividing its length " + std::to_string(S) +
                     ", found " + std::to_string(cfg.k_chunk_size));
}

// Validates the operands as the device op does (one line naming what and
// where); returns the cache length S each user's positions index.
int64_t check_decode_args(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg) {
  if (q.shape.size() != 4 || q.shape[0] != 1)
    throw InputError("sdpa_decode: Q is " + shape_str(q.shape) + ", expected [1, b, nh, dh]");
  if (k.shape.size() != 4 || v.shape != k.shape)
    throw InputError("sdpa_decode: K " + shape_str(k.shape) + " and V " + shape_str(v.shape) +
                     " must both be [b, nkv, S, dh] (or [blocks, nkv, block_size, dh] with a page table)");
  for (const TileTensor* t : {&q, &k, &v})
    if (t->format == DataFormat::Float32)
      throw InputError(std::string("sdpa_decode: ") + (t == &q ? "Q" : t == &k ? "K" : "V") +
                       " is float32; expected bfloat16, bfloat8_b or bfloat4_b (what the kernel's circular buffers take)");
  const int64_t B = q.shape[1], nh = q.shape[2], dh = q.shape[3], nkv = k.shape[1];
  if (k.shape[3] != dh)
    throw InputError("sdpa_decode: head dim of K/V is " + std::to_string(k.shape[3]) + ", Q's is " + std::to_string(dh));
  const int64_t dv = cfg.head_dim_v;
  if (dv < 0 || (dv > 0 && (dv % kTile != 0 || dv > dh || &v != &k)))
    throw InputError("sdpa_decode: head_dim_v " + std::to_string(dv) + ": expected V read from K (use_mla) with a "
                     "multiple of 32 at most K's head dim " + std::to_string(dh));
  if (dv > 0 && !cfg.is_causal)  // TT-NN: "Multi-latent attention decode only tested for causal!"
    throw InputError("sdpa_decode: use_mla (head_dim_v) needs is_causal=true (TT-NN's check)");
  if (nkv < 1 || nh % nkv != 0)
    throw InputError("sdpa_decode: " + std::to_string(nh) + " q heads are not a multiple of " + std::to_string(nkv) +
                     " kv heads");
  if (page_table ? static_cast<int64_t>(page_table->size()) != B : k.shape[0] != B)
    throw InputError("sdpa_decode: " + std::string(page_table ? "page table rows " : "K/V batch ") +
                     std::to_string(page_table ? page_table->size() : k.shape[0]) + " differ from Q's batch " +
                     std::to_string(B));
  if (cfg.is_causal && static_cast<int64_t>(cur_pos.size()) != B)
    throw InputError("sdpa_decode: expected " + std::to_string(B) + " cur_pos values (one per user), found " +
                     std::to_string(cur_pos.size()));
  if (cfg.k_chunk_size < 0 || (cfg.k_chunk_size > 0 && (cfg.k_chunk_size % kTile != 0 ||
                                                       (cfg.k_chunk_size & (cfg.k_chunk_size - 1)) != 0)))
    throw InputError("sdpa_decode: k_chunk_size must be a power of 2 and a multiple of 32, found " +
                     std::to_string(cfg.k_chunk_size));
  if (cfg.sliding_window_size < 0)
    throw InputError("sdpa_decode: sliding_window_size must be 0 (none) or positive, found " +
                     std::to_string(cfg.sliding_window_size));
  if (!cfg.attention_sink.empty() && static_cast<int64_t>(cfg.attention_sink.size()) != nh)
    throw InputError("sdpa_decode: attention_sink has " + std::to_string(cfg.attention_sink.size()) +
                     " values, expected one per q head (" + std::to_string(nh) + ")");
  if (int64_t{cfg.grid_x} * cfg.grid_y < B)
    throw InputError("sdpa_decode: the grid has " + std::to_string(int64_t{cfg.grid_x} * cfg.grid_y) +
                     " cores, fewer than the batch " + std::to_string(B));
  const int64_t block = k.shape[2];
  const int64_t S = page_table ? block * static_cast<int64_t>(page_table->empty() ? 0 : (*page_table)[0].size()) : block;
  if (page_table)
    for (size_t u = 0; u < page_table->size(); ++u) {
      if (static_cast<int64_t>((*page_table)[u].size()) * block != S)
        throw InputError("sdpa_decode: page table rows differ in length (row " + std::to_string(u) + ")");
      for (int64_t id : (*page_table)[u])
        if (id < 0 || id >= k.shape[0])
          throw InputError("sdpa_decode: page_table[" + std::to_string(u) + "] holds block " + std::to_string(id) +
                           ", expected [0, " + std::to_string(k.shape[0]) + ")");
    }
  for (int64_t b = 0; b < static_cast<int64_t>(cur_pos.size()); ++b)
    if (cur_pos[b] < 0 || cur_pos[b] >= S)
      throw InputError("sdpa_decode: cur_pos[" + std::to_string(b) + "] = " + std::to_string(cur_pos[b]) +
                       ", expected [0, " + std::to_string(S) + ")");
  return S;
}

// One (user, kv head) pair: chunk length, the window's first chunk and
// unaligned start (0 without a window), and how many chunks from there.
struct DecodeJob {
  int64_t b, h, C, first, window_start, num_chunks;
};

// The jobs of every user and kv head, users' chunk sizes chosen as the
// program factory does for their cur_pos.
std::vector<DecodeJob> plan_jobs(const std::vector<int64_t>& cur_pos, int64_t S, int64_t nkv, bool paged,
                           const SdpaDecodeConfig& cfg) {
  std::vector<DecodeJob> jobs;
  for (size_t b = 0; b < cur_pos.size(); ++b) {
    const int64_t C = sdpa_decode_k_chunk_size(cfg, S, paged, cur_pos[b]);
    if (!paged && S % C != 0)
      throw InputError("sdpa_decode: k_chunk_size " + std::to_string(C) + " does not divide the cache length " +
                       std::to_string(S));
    const int64_t valid = (cur_pos[b] + 1 + C - 1) / C * C;
    if (valid > S)
      throw InputError("sdpa_decode: cur_pos " + std::to_string(cur_pos[b]) + " rounded up to k_chunk_size " +
                       std::to_string(C) + " passes the paged cache's length " + std::to_string(S));
    const int64_t W = cfg.sliding_window_size;
    const int64_t ws = W > 0 ? std::max<int64_t>(0, cur_pos[b] + 1 - W) : 0;
    for (int64_t h = 0; h < nkv; ++h) jobs.push_back({static_cast<int64_t>(b), h, C, ws / C, ws, valid / C - ws / C});
  }
  return jobs;
}

// The root's last steps for job jb's G heads (acc reduced over its cores):
// the sink, 1/sum, and the packer into out.
void finish_job(const DecodeJob& jb, Partial& acc, const Ctx& c, const SdpaDecodeConfig& cfg, int64_t G, int64_t D,
                TileTensor& out) {
  for (int64_t r = 0; r < G; ++r) {
    if (!cfg.attention_sink.empty()) {
      // m_new = max(sink, m) (max_block, exact), l = l * exp(m - m_new) +
      // exp(sink - m_new), O *= exp(m - m_new); the exps are
      // sub_exp_block's (scale folded in).
      const float sink = cfg.attention_sink[static_cast<size_t>(jb.h * G + r)];
      const float m = std::max(sink, acc.m[r]);
      const float emd = sub_exp_stat(acc.m[r], m, c), e_sink = sub_exp_stat(sink, m, c);
      acc.l[r] = sdpa_add1(sdpa_mul1(acc.l[r], emd, c.tm), e_sink, c.tm);
      sdpa_mul_bcast(&acc.o[r * D], D, emd, c.tm);
    }
    // recip_block_inplace (the legacy-compatible reciprocal), then OUT *=
    // 1/SUM into the bf16 accumulator, moved to the output's format.
    const float recip = sdpa_recip1(acc.l[r], c.tm);
    float* o = &acc.o[r * D];
    sdpa_mul_bcast(o, D, recip, c.tm);
    pack_from_dst(o, out.matrix(jb.b) + (jb.h * G + r) * D, D, cfg.compute.output, c.fp32, false);
  }
}

// The positions the kernel works in, one per user: with paged blocks of bs
// < 32 rows each block fills a tile (block padding), so the causal op's
// cur_pos p becomes (p / bs) * 32 + p % bs; the non-causal op attends up to
// the last (padded) position, S_k - 1.
std::vector<int64_t> kernel_positions(const std::vector<int64_t>& cur_pos, int64_t B, int64_t S_k, int64_t bs,
                                      bool causal) {
  if (!causal) return std::vector<int64_t>(static_cast<size_t>(B), S_k - 1);
  std::vector<int64_t> pos = cur_pos;
  for (int64_t& p : pos) p = sdpa_decode_padded_position(p, bs);
  return pos;
}

}  // namespace

TileTensor tt_sdpa_decode(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg, const Exec& ex) {
  return tt_sdpa_decode(q, k, v, nullptr, cur_pos, page_table, cfg, ex);
}

TileTensor tt_sdpa_decode(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg, const Exec& ex) {
  const int64_t S = check_decode_args(q, k, v, cur_pos, page_table, cfg);
  const int64_t B = q.shape[1], nh = q.shape[2], nkv = k.shape[1];
  // A paged block under 32 rows is read as the tile that holds it (its rows
  // past the block are the tile's padding, masked on every chunk).
  const int64_t bs = k.shape[2] % kTile != 0 ? k.shape[2] : 0, block = page_table ? k.prows : k.shape[2];
  const int64_t S_k = page_table ? S / k.shape[2] * block : S;
  check_latest_args(q, k, mask, page_table != nullptr, S_k, cur_pos, cfg);
  const std::vector<int64_t> pos = kernel_positions(cur_pos, B, S_k, bs, cfg.is_causal);
  const bool latest = cfg.compute.tt_metal == TtMetal::Latest;
  const SdpaDecodeGrid grid = sdpa_decode_grid(cfg, B, nkv);
  if (grid.cores_per_head > (int64_t{1} << kMaxRounds))
    throw InputError("sdpa_decode: " + std::to_string(grid.cores_per_head) +
                     " cores per head, the kernel's reduction tree takes at most 64 (max_cores_per_head_batch)");
  const int64_t G = nh / nkv, N = grid.cores_per_head, dv = cfg.head_dim_v > 0 ? cfg.head_dim_v : q.pcols;
  const float scale = cfg.scale ? *cfg.scale : 1.0f / std::sqrt(static_cast<float>(q.pcols));
  const float scale_bf16 = sdpa_truncate_bf16(scale);
  const std::vector<DecodeJob> jobs = plan_jobs(pos, S_k, nkv, page_table != nullptr, cfg);
  std::vector<std::vector<Partial>> parts(jobs.size(), std::vector<Partial>(static_cast<size_t>(N)));
  const TileMath tm(cfg.compute.math_fidelity, cfg.compute.fp32_dest_acc_en, cfg.compute.math_approx_mode,
                    ex.kernels(cfg.compute.arch), cfg.compute.arch);
  std::vector<DecodeScratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(static_cast<int64_t>(jobs.size()) * N, [&](int64_t t, int th) {
    const DecodeJob& jb = jobs[static_cast<size_t>(t / N)];
    const int64_t core = t % N;
    int64_t c0 = 0, c1 = 0;
    core_chunks(jb.num_chunks, core, N, c0, c1);
    if (c0 == c1) return;
    c0 += jb.first, c1 += jb.first;
    Ctx c{cfg, tm, scale, scale_bf16, cfg.compute.fp32_dest_acc_en, G, q.pcols, dv, jb.C, latest};
    auto kv_row = [&](bool is_v, int64_t pos) -> const float* {
      const TileTensor& t = is_v ? v : k;
      const int64_t mb = page_table ? (*page_table)[static_cast<size_t>(jb.b)][static_cast<size_t>(pos / block)] : jb.b;
      return t.matrix(mb * nkv + jb.h) + (pos % block) * t.pcols;
    };
    const ChunkMasks mk{jb.first, jb.first + jb.num_chunks - 1, pos[static_cast<size_t>(jb.b)], cfg.is_causal,
                        jb.window_start, bs, mask ? mask->matrix(jb.b) + jb.h * G * mask->pcols : nullptr,
                        mask ? mask->pcols : 0};
    run_core(c, q.matrix(jb.b) + jb.h * G * q.pcols, kv_row, k.pcols, c0, c1, mk, scratch[static_cast<size_t>(th)],
             parts[static_cast<size_t>(t / N)][static_cast<size_t>(core)]);
  });
  TileTensor out = make_tile_tensor({1, B, nh, dv}, cfg.compute.output);
  ex.parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j, int) {
    const DecodeJob& jb = jobs[static_cast<size_t>(j)];
    Ctx c{cfg, tm, scale, scale_bf16, cfg.compute.fp32_dest_acc_en, G, q.pcols, dv, jb.C, latest};
    Partial acc = reduce_rank(parts[static_cast<size_t>(j)], 0, static_cast<uint32_t>(N), jb.num_chunks, c);
    finish_job(jb, acc, c, cfg, G, dv, out);
  });
  return out;
}

}  // namespace mha::ttsim
