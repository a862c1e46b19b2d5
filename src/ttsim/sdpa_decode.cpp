#include "ttsim/sdpa_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "tensor/half.h"
#include "ttsim/fpu_internal.h"
#include "ttsim/operands.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/sfpu_mad.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr int kMaxRounds = 6;  // the kernel's MAX_TREE_REDUCTION_ROUNDS (64 cores per head)

// One core's running state: max and sum per q row (G), output G x dh; every
// value a bfloat16 circular-buffer value.
struct Partial {
  bool has_data = false;
  std::vector<float> m, l, o;
};

struct Ctx {
  const SdpaDecodeConfig& cfg;
  float scale, scale_bf16;  // fp32 scale (scores' exp), bf16-cut scale (statistics)
  bool fp32;
  int64_t G, dh, C;  // q rows per kv head, head dim (padded), chunk length
};

// A Dst value packed to a bfloat16 circular buffer.
float pack_bf16(float dst, bool fp32) {
  float out;
  pack_from_dst(&dst, &out, 1, DataFormat::Bfloat16, fp32, false);
  return out;
}

// exp(d * scale) as the statistics helpers compute it on the SFPU
// (sub_exp_block, the fused correction; compute_common.hpp
// _calculate_exponential_piecewise_ with SCALE_EN): d times the scale cut to
// bf16 (scale_fp32 >> 16) on SFPMUL, then with exp_approx_mode the approx exp
// (below -42 gives 0), else exp_21f (16-bit Dst) or the fp32 exp. The LReg
// value, before any store.
float stat_exp_lane(float d, const Ctx& c) {
  const float x = sfpu_mul(d, c.scale_bf16);
  if (c.cfg.exp_approx_mode) return sfpu_exp_lane(x, ExpAlgorithm::Approx);
  return sfpu_exp_lane(x, c.fp32 ? ExpAlgorithm::AccurateFp32 : ExpAlgorithm::Accurate21f);
}

// sub_exp_block: ELWSUB of the two bf16 operands into Dst, the statistics
// exp on the SFPU, stored to Dst and packed to bf16.
float sub_exp_stat(float a, float b, const Ctx& c) {
  return pack_bf16(sfpu_store(stat_exp_lane(fpu_add(a, -b, c.fp32), c), c.fp32), c.fp32);
}

// The scores' exp in sub_exp_block_bcast_cols_inplace: ELWSUB of the row max
// (broadcast over columns) into Dst, exp_tile<true, true> with the fp32 scale
// folded into the fast approx constants, stored and packed to bf16.
float sub_exp_scores(float s, float m, const Ctx& c) {
  return pack_bf16(sfpu_store(sfpu_exp_fast_approx_scaled(fpu_add(s, -m, c.fp32), c.scale), c.fp32), c.fp32);
}

float mul_bf16(float in0, float in1, const Ctx& c) {  // in0 in SrcA, in1 in SrcB
  return pack_bf16(fpu_mul(in0, in1, c.cfg.math_fidelity, c.fp32), c.fp32);
}
float add_bf16(float in0, float in1, const Ctx& c) { return pack_bf16(fpu_add(in0, in1, c.fp32), c.fp32); }

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

// Reused buffers of one worker thread (cores run one after another on it).
struct Scratch {
  std::vector<simd::ARec> arec;
  detail::In1Buffer in1;
  std::vector<detail::SrcDatum> sa, sb;
  std::vector<uint32_t> dst;
  std::vector<float> qk, p, cur_max, sums, pv;
};

// dst (rows x N, FP32 bit patterns, row stride N) = in0 @ in1 with all of K
// in Dst (one K block: the kernel's qk_in0_block_w = DHt and out_in0_block_w
// = Sk_chunk_t), in0 element (r, k) at a[r*lda + k] (SrcB), in1 element
// (k, n) at b[k*ks + n*ns] (SrcA). Only the rows asked for are computed: a
// row of the output depends on its own in0 row alone. Vector kernels when
// `kern`, else the lane model (the oracle), in the LLK's order: per K tile,
// phases outer, the two 16-wide K faces inner.
void lane_matmul(const float* a, int64_t lda, DataFormat af, int64_t rows, const float* b, int64_t ks, int64_t ns,
                 DataFormat bf, int64_t K, int64_t N, const Ctx& c, const simd::KernelTable* kern, Scratch& s) {
  const int P = fidelity_phase_count(c.cfg.math_fidelity);
  s.dst.assign(static_cast<size_t>(rows * N), 0u);
  if (kern) {
    s.arec.resize(static_cast<size_t>(rows * K * P));
    detail::decode_in0(a, lda, rows, K, af, c.fp32, P, s.arec.data());
    s.in1.resize(K, N);
    detail::decode_in1(b, ks, ns, K, N, bf, c.fp32, s.in1, 0);
    kern->mvmul(s.arec.data(), K * P, rows, s.in1.view(), N, K / kTile, P, c.fp32, s.dst.data(), N);
    return;
  }
  s.sb.resize(static_cast<size_t>(K));
  s.sa.resize(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) s.sa[n * K + k] = detail::encode_srca(unpack_to_src(b[k * ks + n * ns], bf, c.fp32));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) s.sb[k] = detail::encode_srcb(unpack_to_src(a[r * lda + k], af, c.fp32));
    for (int64_t n = 0; n < N; ++n) {
      uint32_t acc = 0;
      for (int64_t kt = 0; kt < K; kt += kTile)
        for (int ph = 0; ph < P; ++ph)
          for (int64_t kf = kt; kf < kt + kTile; kf += kFace)
            acc = detail::dot16(&s.sb[kf], &s.sa[n * K + kf], acc, ph, c.fp32);
      s.dst[r * N + n] = acc;
    }
  }
}

// The flash loop of one core over chunks [c0, c1) of one (user, kv head):
// q (G rows of dh, Q's format), K and V rows of position `pos` at
// kv_row(false/true, pos). The mask (-inf past cur_pos) is added on the last
// chunk of the whole range, which core 0 owns.
void run_core(const Ctx& c, const float* q, DataFormat qfmt, const std::function<const float*(bool v, int64_t pos)>& kv_row,
              int64_t ld_kv, DataFormat kfmt, DataFormat vfmt, int64_t c0, int64_t c1, int64_t num_chunks,
              int64_t cur_pos, const simd::KernelTable* kern, Scratch& s, Partial& out) {
  const int64_t C = c.C, G = c.G, dh = c.dh;
  const int P = fidelity_phase_count(c.cfg.math_fidelity);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const detail::SrcDatum one = detail::encode_srcb(1.0f);
  const detail::SrcDatum ones16[16] = {one, one, one, one, one, one, one, one,
                                       one, one, one, one, one, one, one, one};
  out.has_data = true;
  out.m.assign(static_cast<size_t>(G), neg_inf);
  out.l.assign(static_cast<size_t>(G), 0.0f);
  out.o.assign(static_cast<size_t>(G * dh), 0.0f);
  s.qk.resize(static_cast<size_t>(G * C));
  s.p.resize(static_cast<size_t>(G * C));
  s.cur_max.resize(static_cast<size_t>(G));
  s.sums.resize(static_cast<size_t>(G));
  s.pv.resize(static_cast<size_t>(G * dh));
  std::vector<detail::SrcDatum> ea(static_cast<size_t>(C));
  for (int64_t j = c0; j < c1; ++j) {
    // QK = Q @ K_chunk^T (K rows read in place: element (d, x) is row x's d),
    // packed to the bf16 qk buffer. A chunk lies in one page (pages are whole
    // multiples of the chunk, or the chunk is a power of two of tiles within one).
    const float* k0 = kv_row(false, j * C);
    lane_matmul(q, dh, qfmt, G, k0, 1, ld_kv, kfmt, dh, C, c, kern, s);
    for (int64_t i = 0; i < G * C; ++i) s.qk[i] = pack_bf16(f32_from_bits(s.dst[i]), c.fp32);
    for (int64_t r = 0; r < G; ++r) {
      float* sc = &s.qk[r * C];
      if (j == num_chunks - 1)  // QK += MASK (add_block_inplace: ELWADD, packed)
        for (int64_t x = 0; x < C; ++x) sc[x] = add_bf16(sc[x], j * C + x > cur_pos ? neg_inf : 0.0f, c);
      // reduce_c MAX over the chunk, then the eltwise max with the previous max.
      float m = sc[0];
      for (int64_t x = 1; x < C; ++x) m = std::max(m, sc[x]);
      if (j > c0) m = std::max(m, out.m[r]);
      s.cur_max[r] = m;
      float* pr = &s.p[r * C];
      for (int64_t x = 0; x < C; ++x) pr[x] = sub_exp_scores(sc[x], m, c);
      // reduce_c SUM: the matrix unit against the 1.0 scaler, P in SrcA.
      for (int64_t x = 0; x < C; ++x) ea[x] = detail::encode_srca(pr[x]);
      uint32_t acc = 0;
      for (int64_t kt = 0; kt < C; kt += kTile)
        for (int ph = 0; ph < P; ++ph)
          for (int64_t kf = kt; kf < kt + kTile; kf += kFace) acc = detail::dot16(ones16, &ea[kf], acc, ph, c.fp32);
      s.sums[r] = pack_bf16(f32_from_bits(acc), c.fp32);
    }
    // OUT_IM = P @ V_chunk, packed to bf16.
    lane_matmul(s.p.data(), C, DataFormat::Bfloat16, G, kv_row(true, j * C), ld_kv, 1, vfmt, C, dh, c, kern, s);
    for (int64_t i = 0; i < G * dh; ++i) s.pv[i] = pack_bf16(f32_from_bits(s.dst[i]), c.fp32);
    for (int64_t r = 0; r < G; ++r) {
      if (j == c0) {  // the first chunk's matmul writes the accumulator itself
        std::copy(&s.pv[r * dh], &s.pv[(r + 1) * dh], &out.o[r * dh]);
        out.l[r] = s.sums[r];
        out.m[r] = s.cur_max[r];
        continue;
      }
      const float emd = sub_exp_stat(out.m[r], s.cur_max[r], c);  // EXP_MAX_DIFF = exp(PREV_MAX - CUR_MAX)
      const float prev_sum = mul_bf16(out.l[r], emd, c);          // PREV_SUM *= EXP_MAX_DIFF
      for (int64_t d = 0; d < dh; ++d) {                          // OUT_ACC = OUT_ACC * EXP_MAX_DIFF + OUT_IM
        float& o = out.o[r * dh + d];
        o = add_bf16(mul_bf16(o, emd, c), s.pv[r * dh + d], c);
      }
      out.l[r] = add_bf16(s.sums[r], prev_sum, c);  // CUR_SUM += PREV_SUM
      out.m[r] = s.cur_max[r];
    }
  }
}

// correction_block (one fused SFPU function: max, both exps, both rescaled
// sums and their sum, every Dst write an SFPSTORE), then the output rescale
// and add on the FPU: the child's (m, l, o) merged into acc.
void merge_child(Partial& acc, const Partial& child, const Ctx& c) {
  const bool fp32 = c.fp32;
  for (int64_t r = 0; r < c.G; ++r) {
    const float m = std::max(acc.m[r], child.m[r]);
    const float e_prev = stat_exp_lane(sfpu_add(acc.m[r], -m), c);
    const float e_child = stat_exp_lane(sfpu_add(child.m[r], -m), c);
    const float l_child = sfpu_store(sfpu_mul(e_child, child.l[r]), fp32);
    const float l_prev = sfpu_store(sfpu_mul(e_prev, acc.l[r]), fp32);
    acc.l[r] = pack_bf16(sfpu_store(sfpu_add(l_child, l_prev), fp32), fp32);
    acc.m[r] = m;
    const float emd = pack_bf16(sfpu_store(e_prev, fp32), fp32), emd2 = pack_bf16(sfpu_store(e_child, fp32), fp32);
    for (int64_t d = 0; d < c.dh; ++d) {
      float& o = acc.o[r * c.dh + d];
      o = add_bf16(mul_bf16(o, emd, c), mul_bf16(child.o[r * c.dh + d], emd2, c), c);
    }
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
  if (paged) return pow2_tiles_up_to(cur_pos / kTile + 1, cfg.fp32_dest_acc_en ? 4 : 8) * kTile;
  int64_t i = 1;
  while (i < S && S % (int64_t{1} << (i + 1)) == 0) ++i;
  return std::min<int64_t>(512, int64_t{1} << i);
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

TileTensor tt_sdpa_decode(const TileTensor& q, const TileTensor& k, const TileTensor& v,
                          const std::vector<int64_t>& cur_pos, const std::vector<std::vector<int64_t>>* page_table,
                          const SdpaDecodeConfig& cfg, const Exec& ex) {
  if (q.shape.size() != 4 || q.shape[0] != 1)
    throw InputError("sdpa_decode: Q is " + shape_str(q.shape) + ", expected [1, b, nh, dh]");
  if (k.shape.size() != 4 || v.shape != k.shape)
    throw InputError("sdpa_decode: K " + shape_str(k.shape) + " and V " + shape_str(v.shape) +
                     " must both be [b, nkv, S, dh] (or [blocks, nkv, block_size, dh] with a page table)");
  const int64_t B = q.shape[1], nh = q.shape[2], dh = q.shape[3], nkv = k.shape[1];
  if (k.shape[3] != dh)
    throw InputError("sdpa_decode: head dim of K/V is " + std::to_string(k.shape[3]) + ", Q's is " + std::to_string(dh));
  if (nkv < 1 || nh % nkv != 0)
    throw InputError("sdpa_decode: " + std::to_string(nh) + " q heads are not a multiple of " + std::to_string(nkv) +
                     " kv heads");
  if (k.shape[2] % kTile != 0)
    throw InputError("sdpa_decode: K/V length " + std::to_string(k.shape[2]) + " is not a multiple of 32");
  if (page_table ? static_cast<int64_t>(page_table->size()) != B : k.shape[0] != B)
    throw InputError("sdpa_decode: " + std::string(page_table ? "page table rows " : "K/V batch ") +
                     std::to_string(page_table ? page_table->size() : k.shape[0]) + " differ from Q's batch " +
                     std::to_string(B));
  if (static_cast<int64_t>(cur_pos.size()) != B)
    throw InputError("sdpa_decode: expected " + std::to_string(B) + " cur_pos values (one per user), found " +
                     std::to_string(cur_pos.size()));
  if (cfg.k_chunk_size < 0 || (cfg.k_chunk_size > 0 && (cfg.k_chunk_size % kTile != 0 ||
                                                       (cfg.k_chunk_size & (cfg.k_chunk_size - 1)) != 0)))
    throw InputError("sdpa_decode: k_chunk_size must be a power of 2 and a multiple of 32, found " +
                     std::to_string(cfg.k_chunk_size));
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
  for (int64_t b = 0; b < B; ++b)
    if (cur_pos[b] < 0 || cur_pos[b] >= S)
      throw InputError("sdpa_decode: cur_pos[" + std::to_string(b) + "] = " + std::to_string(cur_pos[b]) +
                       ", expected [0, " + std::to_string(S) + ")");
  const SdpaDecodeGrid grid = sdpa_decode_grid(cfg, B, nkv);
  if (grid.cores_per_head > (int64_t{1} << kMaxRounds))
    throw InputError("sdpa_decode: " + std::to_string(grid.cores_per_head) +
                     " cores per head, the kernel's reduction tree takes at most 64 (max_cores_per_head_batch)");
  const int64_t G = nh / nkv, N = grid.cores_per_head;
  const float scale = cfg.scale ? *cfg.scale : 1.0f / std::sqrt(static_cast<float>(q.pcols));
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, 4);
  scale_bits &= 0xffff0000u;  // scale_fp32 >> 16: the statistics' exp takes the scale as bf16
  float scale_bf16;
  std::memcpy(&scale_bf16, &scale_bits, 4);

  struct Job {
    int64_t b, h, C, num_chunks;
  };
  std::vector<Job> jobs;
  std::vector<int64_t> chunk_of_batch(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t C = sdpa_decode_k_chunk_size(cfg, S, page_table != nullptr, cur_pos[b]);
    if (!page_table && S % C != 0)
      throw InputError("sdpa_decode: k_chunk_size " + std::to_string(C) + " does not divide the cache length " +
                       std::to_string(S));
    const int64_t valid = (cur_pos[b] + 1 + C - 1) / C * C;
    if (valid > S)
      throw InputError("sdpa_decode: cur_pos " + std::to_string(cur_pos[b]) + " rounded up to k_chunk_size " +
                       std::to_string(C) + " passes the paged cache's length " + std::to_string(S));
    for (int64_t h = 0; h < nkv; ++h) jobs.push_back({b, h, C, valid / C});
  }
  std::vector<std::vector<Partial>> parts(jobs.size(), std::vector<Partial>(static_cast<size_t>(N)));
  std::vector<Scratch> scratch(static_cast<size_t>(ex.threads()));
  ex.parallel_for(static_cast<int64_t>(jobs.size()) * N, [&](int64_t t, int th) {
    const Job& jb = jobs[static_cast<size_t>(t / N)];
    const int64_t core = t % N;
    int64_t c0 = 0, c1 = 0;
    core_chunks(jb.num_chunks, core, N, c0, c1);
    if (c0 == c1) return;
    Ctx c{cfg, scale, scale_bf16, cfg.fp32_dest_acc_en, G, q.pcols, jb.C};
    auto kv_row = [&](bool is_v, int64_t pos) -> const float* {
      const TileTensor& t = is_v ? v : k;
      const int64_t mb = page_table ? (*page_table)[static_cast<size_t>(jb.b)][static_cast<size_t>(pos / block)] : jb.b;
      return t.matrix(mb * nkv + jb.h) + (pos % block) * t.pcols;
    };
    run_core(c, q.matrix(jb.b) + jb.h * G * q.pcols, q.format, kv_row, k.pcols, k.format, v.format, c0, c1,
             jb.num_chunks, cur_pos[static_cast<size_t>(jb.b)], ex.kernels(), scratch[static_cast<size_t>(th)],
             parts[static_cast<size_t>(t / N)][static_cast<size_t>(core)]);
  });
  TileTensor out = make_tile_tensor(q.shape, cfg.output);
  ex.parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j, int) {
    const Job& jb = jobs[static_cast<size_t>(j)];
    Ctx c{cfg, scale, scale_bf16, cfg.fp32_dest_acc_en, G, q.pcols, jb.C};
    Partial acc = reduce_rank(parts[static_cast<size_t>(j)], 0, static_cast<uint32_t>(N), jb.num_chunks, c);
    std::vector<float> row(static_cast<size_t>(q.pcols));
    for (int64_t r = 0; r < G; ++r) {
      // recip_block_inplace (the legacy-compatible reciprocal), then OUT *= 1/SUM.
      const float recip = pack_bf16(sfpu_reciprocal_legacy(acc.l[r], cfg.math_approx_mode, c.fp32), c.fp32);
      for (int64_t d = 0; d < q.pcols; ++d)
        row[d] = unpack_to_src(mul_bf16(acc.o[r * q.pcols + d], recip, c), DataFormat::Bfloat16, c.fp32);
      pack_from_dst(row.data(), out.matrix(jb.b) + (jb.h * G + r) * q.pcols, q.pcols, cfg.output, c.fp32, false);
    }
  });
  return out;
}

}  // namespace mha::ttsim
