#include "parallel/ring.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/cpu_thread_pool.h"
#include "model/mask.h"
#include "model/rope.h"
#include "parallel/collective.h"
#include "parallel/head_parallel.h"
#include "parallel/ring_io.h"
#include "parallel/wire.h"
#include "parallel/world.h"
#include "util/error.h"

namespace mha::parallel {

namespace {

// What rank 0 sends each rank.
struct RingWork {
  int64_t wide = 0;    // 1: float64 arithmetic (reference backend), 0: float32
  int64_t passes = 1;  // first + warmup + iterations
  int64_t threads = 1; // float32 path: threads per rank (the cpu backend's "threads")
  int64_t L = 0;       // the whole sequence
  AttentionSpec spec;  // q, k, v projections and scalars
  std::optional<Tensor> out_w, out_b;
  Tensor x;          // [B, n, E] this rank's token rows, in chunk order (empty when `source` draws them)
  Tensor positions;  // int64 [Bp, n] their rope positions
  RowSource source;  // Rand / Randn: the rank draws x itself (ring_io.h)
};

std::string encode(const RingWork& w) {
  Writer out;
  out.i64(w.wide);
  out.i64(w.passes);
  out.i64(w.threads);
  out.i64(w.L);
  write_spec(out, w.spec);
  out.opt_tensor(w.out_w);
  out.opt_tensor(w.out_b);
  out.opt_tensor(w.x.ndim() ? std::optional<Tensor>(w.x) : std::nullopt);  // none: the rank draws it
  out.tensor(w.positions);
  out.i64(static_cast<int64_t>(w.source.kind));
  out.i64(static_cast<int64_t>(w.source.seed));
  out.i64(static_cast<int64_t>(w.source.shape.size()));
  for (int64_t d : w.source.shape) out.i64(d);
  return out.bytes();
}

RingWork decode(const std::string& bytes) {
  Reader in(bytes);
  RingWork w;
  w.wide = in.i64();
  w.passes = in.i64();
  w.threads = in.i64();
  w.L = in.i64();
  w.spec = read_spec(in);
  w.out_w = in.opt_tensor();
  w.out_b = in.opt_tensor();
  if (auto x = in.opt_tensor()) w.x = std::move(*x);
  w.positions = in.tensor();
  w.source.kind = static_cast<RowSourceKind>(in.i64());
  w.source.seed = static_cast<uint64_t>(in.i64());
  w.source.shape.resize(static_cast<std::size_t>(in.i64()));
  for (int64_t& d : w.source.shape) d = in.i64();
  return w;
}

// x [rows, in] -> y [rows, out] = x W^T + b, accumulated in T: the cpu
// backend's sgemm split over `pool` in float32, plain loops in float64
// (reference).
template <class T>
void project(ThreadPool* pool, const T* x, int64_t rows, int64_t in, const Tensor& w, const std::optional<Tensor>& b,
             T* y) {
  const int64_t out = w.dim(0);
  if constexpr (std::is_same_v<T, float>) {
    cpu::sgemm(*pool, true, rows, out, in, x, in, w.data<float>(), in, 0.0f, y, out);
    if (b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) y[r * out + o] += b->data<float>()[o];
    return;
  }
  const T* W = w.data<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      T s = b ? b->data<T>()[o] : T(0);
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * W[o * in + i];
      y[r * out + o] = s;
    }
}

// The float32 block update: queries [qs, qs+ql) of one head against keys
// [ks, ks+kl) of its kv head, kTile x kTile at a time, on the calling
// thread. Per tile, in log2 units (scale * log2 e folded into the sgemm):
//   S = c1 Q K^T (sgemm), masked by `rule` to -inf unless every pair of the
//   tile is visible;
//   per row: m' = max(m, max_j S), c = 2^(m - m'), l = l c + sum_j 2^(S - m'),
//   acc = acc c + 2^(S - m') V (sgemm, beta 1 after the rescale).
// q [ql, dh] (row stride ldq), k [kl, dh] (ldk), v [kl, dv] (ldv),
// acc [ql, dv] (ldacc), m (log2 units) and l [ql]; s: kTile * kTile scratch.
constexpr int64_t kTile = 128;
constexpr float kLog2e = 1.4426950408889634f;
void attend_tiles(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv, float* acc,
                  int64_t ldacc, float* m, float* l, int64_t qs, int64_t ql, int64_t ks, int64_t kl, int64_t dh,
                  int64_t dv, float scale, const MaskRule& rule, float* s) {
  const float inf = std::numeric_limits<float>::infinity();
  const __m256 vninf = _mm256_set1_ps(-inf);
  for (int64_t i0 = 0; i0 < ql; i0 += kTile) {
    const int64_t ni = std::min(kTile, ql - i0);
    for (int64_t j0 = 0; j0 < kl; j0 += kTile) {
      const int64_t nj = std::min(kTile, kl - j0);
      // Skip a tile no query of it can see.
      if (!(ks + j0 + nj > rule.first_key(qs + i0) && ks + j0 < rule.end_key(qs + i0 + ni, ks + kl))) continue;
      // Causal needs j <= i, the window j > i - w: the two corners decide.
      const bool whole = rule.visible(qs + i0, ks + j0 + nj - 1) && rule.visible(qs + i0 + ni - 1, ks + j0);
      cpu::sgemm(true, ni, nj, dh, q + i0 * ldq, ldq, k + j0 * ldk, ldk, 0.0f, s, nj);
      const __m256 vc1 = _mm256_set1_ps(scale * kLog2e);
      const int64_t nj8 = nj / 8 * 8;
      for (int64_t i = 0; i < ni; ++i) {
        float* row = s + i * nj;
        __m256 vmx = vninf;
        int64_t j = 0;
        for (; j < nj8; j += 8) {
          const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(row + j), vc1);
          _mm256_storeu_ps(row + j, x);
          vmx = _mm256_max_ps(vmx, x);
        }
        for (; j < nj; ++j) row[j] *= scale * kLog2e;
        if (!whole)
          for (j = 0; j < nj; ++j)
            if (!rule.visible(qs + i0 + i, ks + j0 + j)) row[j] = -inf;
        float mx = -inf;
        if (whole) {
          alignas(32) float lanes[8];
          _mm256_store_ps(lanes, vmx);
          for (float x : lanes) mx = std::max(mx, x);
          for (j = nj8; j < nj; ++j) mx = std::max(mx, row[j]);
        } else {
          for (j = 0; j < nj; ++j) mx = std::max(mx, row[j]);
        }
        float* a = acc + (i0 + i) * ldacc;
        const float mnew = std::max(m[i0 + i], mx);
        if (mnew == -inf) {  // nothing visible yet: the row contributes nothing
          std::fill(row, row + nj, 0.0f);
          continue;
        }
        const float c = std::exp2(m[i0 + i] - mnew);  // 0 when m was -inf
        const __m256 vm = _mm256_set1_ps(mnew);
        __m256 vsum = _mm256_setzero_ps();
        for (j = 0; j < nj8; j += 8) {
          const __m256 e = cpu::exp2_ps(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
          _mm256_storeu_ps(row + j, e);
          vsum = _mm256_add_ps(vsum, e);
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, vsum);
        float sum = 0;
        for (float x : lanes) sum += x;
        for (; j < nj; ++j) sum += (row[j] = std::exp2(row[j] - mnew));
        l[i0 + i] = l[i0 + i] * c + sum;
        m[i0 + i] = mnew;
        if (c != 1.0f)
          for (int64_t e = 0; e < dv; ++e) a[e] *= c;
      }
      cpu::sgemm(false, ni, dv, nj, s, nj, v + j0 * ldv, ldv, 1.0f, acc + i0 * ldacc, ldacc);
    }
  }
}

// Sub-block i of S of a rank's chunks (ring_chunks): chunk i when there
// are S chunks, else rows [i * len, (i + 1) * len) of its one chunk.
Chunks sub_chunk(const Chunks& chunks, int64_t i, int64_t S) {
  if (static_cast<int64_t>(chunks.size()) == S) return {chunks[i]};
  const int64_t len = chunks[0].second / S;
  return {{chunks[0].first + i * len, len}};
}

// One rank's ring pass; returns its output rows [B, n, out_dim]. Buffers
// live only while needed, so that a rank's peak is about q + acc + 1.5 K|V
// blocks (x [B, n, E] too unless this is the last pass, which frees it
// after the projection): 1/N of a one-process run's.
template <class T>
Tensor ring_pass(RingWork& w, int64_t me, int64_t N, bool last) {
  const AttentionSpec& s = w.spec;
  const DType dt = w.wide ? DType::F64 : DType::F32;
  const int64_t B = w.x.dim(0), n = w.x.dim(1), E = w.x.dim(2);
  const int64_t H = s.num_heads, G = s.num_kv_heads, dh = s.head_dim, dv = s.head_dim_v, group = H / G;
  const int64_t kw = G * dh, vw = G * dv;
  const bool causal = s.causal;
  const MaskRule rule(s);
  // K|V travels in S sub-blocks of len rows (a causal rank's two chunks, or
  // the two halves of a contiguous block; one when n is odd), so a rank
  // holds S + 1 of them (attended and sent, next, arriving) instead of two
  // whole blocks: a quarter less K|V memory per rank (docs/BENCHMARKS.md,
  // "131072-token ring attention on 2 ranks").
  // Sub-block layout, per batch: K [len, kw] then V [len, vw].
  const int64_t S = n % 2 == 0 ? 2 : 1, len = n / S, sblk = len * (kw + vw);
  // Every buffer the ring steps use is agreed on before the first block
  // travels, so that nothing fails once blocks travel: the projection's
  // first, then (x and the rope table freed) the steps'.
  std::vector<T> q, acc, m, l;
  std::vector<std::vector<T>> buf(S + 1);
  std::vector<float> scores;  // float32 path: one kTile x kTile score tile per thread
  std::unique_ptr<ThreadPool> pool;
  Tensor y;
  collectively([&] {
    if constexpr (std::is_same_v<T, float>) pool = std::make_unique<ThreadPool>(static_cast<int>(w.threads));
    q.resize(B * n * H * dh);
    for (int64_t i = 0; i < S; ++i) buf[i].resize(B * sblk);
  });

  // Project (and rotate) this rank's rows; K|V packed per batch for the ring.
  const T* x = w.x.data<T>();
  std::optional<RopeTable> rope;
  if (s.rope) {
    AttentionInputs at;
    at.query = w.x;
    at.positions = w.positions;
    rope = rope_table(s, at);
  }
  // The cpu backend's threads, not OpenBLAS's: its own would spin beside
  // the pool's (cpu_gemm.h) and ignore the rank's thread count.
  std::optional<cpu::SerialBlasScope> serial;
  if constexpr (std::is_same_v<T, float>) serial.emplace();
  project<T>(pool.get(), x, B * n, E, s.q.weight, s.q.bias, q.data());
  if (rope) apply_rope_rows<T>(*rope, q.data(), H * dh, 0, B * n, H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i) {
      T* K = buf[i].data() + b * sblk;  // projected in place
      const int64_t r0 = b * n + i * len;
      project<T>(pool.get(), x + r0 * E, len, E, s.k.weight, s.k.bias, K);
      if (rope) apply_rope_rows<T>(*rope, K, kw, r0, len, G);
      project<T>(pool.get(), x + r0 * E, len, E, s.v.weight, s.v.bias, K + len * kw);
    }
  rope.reset();
  if (last) w.x = Tensor();  // no later pass projects it again
  collectively([&] {
    if constexpr (std::is_same_v<T, float>) scores.resize(w.threads * kTile * kTile);
    acc.assign(B * n * H * dv, T(0));
    m.assign(B * H * n, -std::numeric_limits<T>::infinity());
    l.assign(B * H * n, T(0));
    buf[S].resize(B * sblk);
  });

  const Chunks mine = ring_chunks(w.L, me, N, causal);
  // Sub-step t attends sub-block t % S of rank (me - t / S)'s keys, from
  // buf[t % (S + 1)], while sending it on to rank me + 1 (which attends it
  // at t + S) and receiving into the buffer attended at t - 1 the
  // sub-block this rank attends at t + S.
  for (int64_t t = 0; t < N * S; ++t) {
    const T* cur = buf[t % (S + 1)].data();
    RingExchange ex;
    if (t + S < N * S)
      ex.start(cur, buf[(t + S) % (S + 1)].data(), static_cast<int64_t>(B * sblk * sizeof(T)),
               static_cast<int>((me + 1) % N), static_cast<int>((me + N - 1) % N));
    const Chunks theirs = sub_chunk(ring_chunks(w.L, (me + N - t / S) % N, N, causal), t % S, S);
    if constexpr (std::is_same_v<T, float>) {
      // One task per (batch, query chunk, head), its key chunks in order: no
      // two tasks touch the same rows of acc, m and l, and the result does
      // not depend on the thread count.
      const int64_t nq = static_cast<int64_t>(mine.size());
      pool->parallel_for(B * nq * H, [&](int64_t t, int thread) {
        const int64_t h = t % H, c = (t / H) % nq, b = t / (H * nq);
        const auto [qs, ql] = mine[c];
        const int64_t qi0 = c == 0 ? 0 : mine[0].second;  // at most two chunks
        const float* K = cur + b * sblk;
        const float* V = K + len * kw;
        int64_t kj0 = 0;
        for (const auto& [ks, kl] : theirs) {
          if (ks + kl > rule.first_key(qs) && ks < rule.end_key(qs + ql, w.L))
            attend_tiles(q.data() + ((b * n + qi0) * H + h) * dh, H * dh, K + kj0 * kw + (h / group) * dh, kw,
                         V + kj0 * vw + (h / group) * dv, vw, acc.data() + ((b * n + qi0) * H + h) * dv, H * dv,
                         m.data() + (b * H + h) * n + qi0, l.data() + (b * H + h) * n + qi0, qs, ql, ks, kl, dh, dv,
                         static_cast<float>(s.scale), rule, scores.data() + thread * kTile * kTile);
          kj0 += kl;
        }
      });
    } else {
      for (int64_t b = 0; b < B; ++b) {
        const T* K = cur + b * sblk;
        const T* V = K + len * kw;
        int64_t qi0 = 0;
        for (const auto& [qs, ql] : mine) {
          int64_t kj0 = 0;
          for (const auto& [ks, kl] : theirs) {
            // Skip a chunk pair no query of the chunk can see.
            if (!(ks + kl > rule.first_key(qs) && ks < rule.end_key(qs + ql, w.L))) {
              // no query of the chunk sees a key of theirs
            } else {
              for (int64_t i = 0; i < ql; ++i)
                for (int64_t h = 0; h < H; ++h) {
                  const int64_t li = qi0 + i, g = h / group;
                  const T* qv = q.data() + ((b * n + li) * H + h) * dh;
                  T* a = acc.data() + ((b * n + li) * H + h) * dv;
                  T& mx = m[(b * H + h) * n + li];
                  T& sum = l[(b * H + h) * n + li];
                  for (int64_t j = 0; j < kl; ++j) {
                    if (!rule.visible(qs + i, ks + j)) continue;
                    const T* kv = K + (kj0 + j) * kw + g * dh;
                    T d = 0;
                    for (int64_t e = 0; e < dh; ++e) d += qv[e] * kv[e];
                    d *= static_cast<T>(s.scale);
                    const T* vv = V + (kj0 + j) * vw + g * dv;
                    if (d > mx) {  // new running max: rescale what was summed so far
                      const T c = std::exp(mx - d);
                      sum = sum * c + T(1);
                      for (int64_t e = 0; e < dv; ++e) a[e] = a[e] * c + vv[e];
                      mx = d;
                    } else {
                      const T p = std::exp(d - mx);
                      sum += p;
                      for (int64_t e = 0; e < dv; ++e) a[e] += p * vv[e];
                    }
                  }
                }
            }
            kj0 += kl;
          }
          qi0 += ql;
        }
      }
    }
    ex.wait();
  }

  // context = acc / sum, then this rank's rows of the output projection.
  std::vector<T>().swap(q);
  std::vector<std::vector<T>>().swap(buf);
  collectively([&] { y = Tensor(dt, {B, n, w.out_w ? w.out_w->dim(0) : H * dv}); });
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const T inv = T(1) / l[(b * H + h) * n + i];
        T* a = acc.data() + ((b * n + i) * H + h) * dv;
        for (int64_t e = 0; e < dv; ++e) a[e] *= inv;
      }
  if (w.out_w) project<T>(pool.get(), acc.data(), B * n, H * dv, *w.out_w, w.out_b, y.data<T>());
  else std::memcpy(y.raw(), acc.data(), acc.size() * sizeof(T));
  return y;
}

// One pass on every rank. Rank 0 hands its rows and then each other
// rank's, as they arrive, to `sink` (nullptr: received and dropped, for the
// timed passes before the last), so it never holds more than two ranks'
// rows; a failure there (a full disk) is agreed on after every rank's rows
// are in, so no rank is left waiting to send.
void pass(RingWork& w, bool last, OutputSink* sink) {
  const int64_t me = rank(), N = size();
  Tensor y = w.wide ? ring_pass<double>(w, me, N, last) : ring_pass<float>(w, me, N, last);
  if (me != 0) {
    send_bytes(std::string(reinterpret_cast<const char*>(y.raw()), y.nbytes()), 0);
    collectively([] {});
    return;
  }
  std::string err;
  auto deliver = [&](const uint8_t* rows, int64_t r) {
    if (!sink || !err.empty()) return;
    try {
      sink->put(rows, ring_chunks(w.L, r, N, w.spec.causal));
    } catch (...) {
      err = error_of(std::current_exception());
    }
  };
  deliver(y.raw(), 0);
  const std::size_t nbytes = y.nbytes();
  y = Tensor();
  for (int64_t r = 1; r < N; ++r) {
    const std::string rows = recv_bytes(static_cast<int>(r));
    if (rows.size() != nbytes && err.empty()) err = "rank " + std::to_string(r) + " sent a wrong-sized block";
    else deliver(reinterpret_cast<const uint8_t*>(rows.data()), r);
  }
  collectively([&] {
    if (!err.empty()) throw InputError(err);
  });
}

// Rope positions of rows `chunks` when the input gives none: [1, n].
Tensor chunk_positions(const Chunks& chunks) {
  int64_t n = 0;
  for (const auto& c : chunks) n += c.second;
  Tensor p(DType::I64, {1, n});
  int64_t i = 0;
  for (const auto& [start, len] : chunks)
    for (int64_t j = 0; j < len; ++j) p.data<int64_t>()[i++] = start + j;
  return p;
}

// Token rows `chunks` of t [B, L, ...] -> [B, n, ...].
Tensor take_rows(const Tensor& t, const Chunks& chunks) {
  const int64_t B = t.dim(0), L = t.dim(1), n = [&] {
    int64_t k = 0;
    for (const auto& c : chunks) k += c.second;
    return k;
  }();
  Shape shape = t.shape();
  shape[1] = n;
  Tensor r(t.dtype(), shape);
  const std::size_t row = (t.numel() / (B * L)) * dtype_size(t.dtype());
  for (int64_t b = 0; b < B; ++b) {
    int64_t li = 0;
    for (const auto& [start, len] : chunks) {
      std::memcpy(r.raw() + (b * n + li) * row, t.raw() + (b * L + start) * row, len * row);
      li += len;
    }
  }
  return r;
}

bool same_data(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::optional<Tensor> cast_opt(const std::optional<Tensor>& t, DType d) {
  if (!t) return std::nullopt;
  return t->cast(d);
}

void refuse(const std::string& why) { throw InputError("parallel.sequence: " + why); }

}  // namespace

Chunks ring_chunks(int64_t L, int64_t part, int64_t parts, bool causal) {
  const int64_t pieces = causal ? 2 * parts : parts;
  if (L % pieces != 0)
    refuse(std::to_string(L) + " tokens do not split into " + std::to_string(pieces) + " equal " +
           (causal ? "chunks (a causal ring takes 2 per rank)" : "blocks"));
  const int64_t c = L / pieces;
  if (!causal) return {{part * c, c}};
  return {{part * c, c}, {(2 * parts - 1 - part) * c, c}};
}

RunReport run_ring(PreparedRun& prepared, Backend& backend, const RunRequest& request, WorkerRelease& release,
                   const Fault& fault) {
  const int64_t N = size();
  const ParallelConfig& pc = *prepared.config.parallel;
  if (pc.ranks != N)
    refuse("the config asks for " + std::to_string(pc.ranks) + " ranks, but mha runs on " + std::to_string(N) +
           (mpi_built() ? " (start it with mpirun -np " + std::to_string(pc.ranks) + ")"
                        : " (this mha was built without MPI: install OpenMPI and build with -DMHA_MPI=ON)"));
  if (request.need_weights || prepared.options.need_weights)
    refuse("attention weights are not gathered across ranks; drop need_weights / --attn-weights");
  if (prepared.config.decode) refuse("a decode run keeps one KV cache and is not split across ranks");
  if (request.collect_stages) refuse("stages are not gathered across ranks; drop --dump-stages / --compare-stages");
  const std::string bname = backend.name();
  if (bname != "cpu" && bname != "reference")
    refuse("backend " + bname + " cannot run ring attention (cpu and reference only)");
  // The inputs: by rows per rank when the run allows it (ring_io.h), else
  // whole on rank 0. A PreparedRun that already holds them keeps them.
  std::optional<StreamPlan> plan;
  if (prepared.inputs.query.ndim() == 0) try {
      plan = plan_stream(prepared);
      if (plan) prepared.inputs = plan->probe;
      else prepare_inputs(prepared);
    } catch (const InputError& e) {
      throw InputError(prepared.config.file + ": " + e.what());  // which config the input belongs to
    }
  auto f32 = backend_view(prepared, backend);
  const AttentionSpec& spec = f32 ? f32->first : prepared.spec;
  const AttentionInputs& inputs = f32 ? f32->second : prepared.inputs;
  if (inputs.mask) refuse("an explicit mask is not split across ranks (causal and window are)");
  if (spec.extra_keys() > 0) refuse("bias_k / add_zero_attn add key rows outside the sequence");
  if (inputs.training && spec.dropout > 0.0) refuse("training-mode dropout is not split across ranks");
  if (!same_data(inputs.query, inputs.key) || !same_data(inputs.query, inputs.value))
    refuse("ring attention is self-attention: query, key and value must be the same tensor");
  require_supported(backend, spec, inputs);
  const Shape x_shape = plan ? plan->source.shape : inputs.query.shape();
  const int64_t B = x_shape[0], L = x_shape[1];
  ring_chunks(L, 0, N, spec.causal);  // refuses an uneven split before the workers start

  const int64_t warmup = request.warmup.value_or(prepared.config.warmup);
  const int64_t iterations = request.iterations.value_or(prepared.config.iterations);
  const DType dt = bname == "reference" ? DType::F64 : DType::F32;
  // Every rank runs as many threads as the cpu backend here was given.
  const nlohmann::json info = backend.describe();
  const int64_t threads = info.contains("threads") && info["threads"].is_number_integer()
                              ? std::max<int64_t>(1, info["threads"].get<int64_t>())
                              : 1;
  RingWork base;
  base.wide = dt == DType::F64;
  base.passes = 1 + warmup + iterations;
  base.threads = threads;
  base.L = L;
  base.spec = spec;
  base.spec.out.reset();  // travels cast to the ring's dtype, as out_w / out_b
  for (Projection* p : {&base.spec.q, &base.spec.k, &base.spec.v}) {
    p->weight = p->weight.cast(dt);
    p->bias = cast_opt(p->bias, dt);
  }
  if (spec.out) {
    base.out_w = spec.out->weight.cast(dt);
    base.out_b = cast_opt(spec.out->bias, dt);
  }
  const int64_t out_dim = base.out_w ? base.out_w->dim(0) : spec.num_heads * spec.head_dim_v;
  // Rank r's work: its rows read here (a .npy source, or the whole input),
  // or drawn by the rank itself (rand / randn).
  auto work_for = [&](int64_t r) {
    const Chunks chunks = ring_chunks(L, r, N, spec.causal);
    RingWork w = base;
    if (!plan) w.x = take_rows(inputs.query.cast(dt), chunks);
    else if (plan->source.kind == RowSourceKind::Sent) w.x = source_rows(plan->source, chunks, dt);
    else w.source = plan->source;
    w.positions = inputs.positions && !plan ? take_rows(*inputs.positions, chunks) : chunk_positions(chunks);
    return w;
  };
  release.go(2);
  // One rank's message at a time, so rank 0 holds its rows and one other
  // rank's; a failure still sends (an empty message, which that rank fails
  // to decode) so that nobody waits, and all ranks agree on it below.
  std::string err;
  for (int64_t r = 1; r < N; ++r) {
    std::string msg;
    if (err.empty() && r != fault.bad_shape_rank) try {
        msg = encode(work_for(r));
      } catch (...) {
        err = error_of(std::current_exception());
      }
    send_bytes(msg, static_cast<int>(r));
  }
  RingWork mine;
  collectively([&] {
    if (!err.empty()) throw InputError(err);
    mine = work_for(0);
    if (mine.source.kind != RowSourceKind::Sent) mine.x = source_rows(mine.source, ring_chunks(L, 0, N, spec.causal), dt);
  });

  // The output: whole on rank 0 only when something needs it (ring_io.h).
  const bool need_whole = !plan || prepared.config.reference || B * L * out_dim <= kWholeOutputElements;
  OutputSink sink({B, L, out_dim}, dt, need_whole, plan ? request.output_file : "");
  RunReport rep;
  rep.backend_name = backend.name();
  {
    AttentionInputs dims = inputs;  // attention_flops reads [B, L] only
    if (plan) dims.query = dims.key = dims.value = Tensor(dt, {B, L, 0});
    rep.timing.flops = attention_flops(spec, dims);
  }
  using clock = std::chrono::steady_clock;
  for (int64_t p = 0; p < mine.passes; ++p) {
    const bool last = p + 1 == mine.passes;
    const auto t0 = clock::now();
    pass(mine, last, last ? &sink : nullptr);
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (p == 0) rep.timing.first_ms = ms;
    else if (p > warmup) rep.timing.cached_ms.push_back(ms);
  }
  sink.close();
  summarize_timing(rep.timing);
  const std::vector<int64_t> stats = gather_rank_stats();
  std::vector<int64_t> sent(N), peak(N);
  for (int64_t r = 0; r < N; ++r) sent[r] = stats[2 * r], peak[r] = stats[2 * r + 1];
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  rep.backend_info["parallel"] = {{"mode", "sequence"},
                                  {"ranks", N},
                                  {"bytes_sent_per_rank", sent},
                                  {"peak_rss_bytes_per_rank", peak},
                                  {"input", !plan ? "whole on rank 0"
                                            : plan->source.kind == RowSourceKind::Sent ? "rows read by rank 0 per rank"
                                                                                        : "rows drawn by each rank"},
                                  {"output", need_whole ? "whole on rank 0" : "rows written as they arrive"}};
  rep.output_written = plan && !request.output_file.empty();
  if (need_whole) {
    AttentionResult result;
    result.output = sink.whole();
    rep.result = prepared.variant->finish(std::move(result), prepared.options, inputs);
    rep.comparison = compare_with_reference(prepared.config, rep.result.output);
  } else {
    rep.output_rows = sink.edges();
  }
  return rep;
}

int serve_ring() {
  try {
    RingWork w;
    collectively([&] {
      w = decode(recv_bytes(0));
      if (w.source.kind != RowSourceKind::Sent)
        w.x = source_rows(w.source, ring_chunks(w.L, rank(), size(), w.spec.causal), w.wide ? DType::F64 : DType::F32);
    });
    for (int64_t p = 0; p < w.passes; ++p) pass(w, p + 1 == w.passes, nullptr);
    gather_rank_stats();
  } catch (const InputError&) {
    return 2;  // rank 0 reports it
  }
  return 0;
}

}  // namespace mha::parallel
