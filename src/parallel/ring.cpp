#include "parallel/ring.h"

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/mask.h"
#include "model/qk_norm.h"
#include "model/rope.h"
#include "parallel/collective.h"
#include "parallel/ring_io.h"
#include "parallel/wire.h"
#include "parallel/world.h"
#include "run/passes.h"
#include "util/error.h"

namespace mha::parallel {

namespace {

// The buffers a rank keeps from one pass to the next, so that a timed pass
// does not fault their pages in again (the last pass frees them as it goes).
struct RingScratch {
  Tensor q;                               // [B, n, H*dh]; then the output rows, when they fit
  SoftmaxState state;                     // of the n query rows
  std::vector<std::vector<uint8_t>> buf;  // S + 1 K|V sub-blocks (KvLayout)
  Tensor y;                               // the output rows, when they do not fit in q
};

// What rank 0 sends each rank: the backend to make (every rank runs the
// same one), the spec with its weights in the backend's arithmetic dtype,
// and this rank's rows.
struct RingWork {
  std::string backend;
  std::string backend_options;  // JSON text
  int64_t passes = 1;  // first + warmup + iterations
  int64_t L = 0;       // the whole sequence
  AttentionSpec spec;  // q, k, v projections and scalars
  std::optional<Projection> out;
  Tensor x;          // [B, n, E] this rank's token rows, in chunk order (empty when `source` draws them)
  Tensor positions;  // int64 [Bp, n] their rope positions
  RowSource source;  // Rand / Randn: the rank draws x itself (ring_io.h)
  RingScratch scratch;  // not sent: this rank's buffers between passes
};

std::string encode_ring(const RingWork& w) {
  Writer out;
  out.str(w.backend);
  out.str(w.backend_options);
  out.i64(w.passes);
  out.i64(w.L);
  write_spec(out, w.spec);
  out.opt_tensor(w.out ? std::optional<Tensor>(w.out->weight) : std::nullopt);
  out.opt_tensor(w.out ? w.out->bias : std::nullopt);
  out.opt_tensor(w.x.ndim() ? std::optional<Tensor>(w.x) : std::nullopt);  // none: the rank draws it
  out.tensor(w.positions);
  out.i64(static_cast<int64_t>(w.source.kind));
  out.i64(static_cast<int64_t>(w.source.seed));
  out.i64(static_cast<int64_t>(w.source.shape.size()));
  for (int64_t d : w.source.shape) out.i64(d);
  return out.bytes();
}

RingWork decode_ring(const std::string& bytes) {
  Reader in(bytes);
  RingWork w;
  w.backend = in.str();
  w.backend_options = in.str();
  w.passes = in.i64();
  w.L = in.i64();
  w.spec = read_spec(in);
  if (auto ow = in.opt_tensor()) w.out = Projection{std::move(*ow), std::nullopt};
  if (auto ob = in.opt_tensor()) w.out->bias = std::move(*ob);
  if (auto x = in.opt_tensor()) w.x = std::move(*x);
  w.positions = in.tensor();
  w.source.kind = static_cast<RowSourceKind>(in.i64());
  w.source.seed = static_cast<uint64_t>(in.i64());
  w.source.shape.resize(static_cast<std::size_t>(in.i64()));
  for (int64_t& d : w.source.shape) d = in.i64();
  return w;
}

// QK-normalises (model/qk_norm.h, the key's or the query's weights) and
// rotates (model/rope.h, in the table's positions) rows [row0, row0 + n)
// of a [rows, ld] projection, in its dtype T.
template <class T>
void prepare_rows(const AttentionSpec& s, const RopeTable* t, bool key, T* x, int64_t ld, int64_t row0, int64_t n,
                  int64_t heads) {
  if (const auto norm = qk_norm_weights<T>(s))
    apply_qk_norm_rows(key ? norm->k : norm->q, norm->eps, x, ld, n, heads, s.head_dim);
  if (t) apply_rope_rows(*t, x, ld, row0, n, heads);
}
void prepare_rows(const AttentionSpec& s, const RopeTable* t, bool key, DType dt, void* x, int64_t ld, int64_t row0,
                  int64_t n, int64_t heads) {
  if (dt == DType::F64) prepare_rows(s, t, key, static_cast<double*>(x), ld, row0, n, heads);
  else prepare_rows(s, t, key, static_cast<float*>(x), ld, row0, n, heads);
}

// Sub-block i of S of a rank's chunks (ring_chunks): chunk i when there
// are S chunks, else rows [i * len, (i + 1) * len) of its one chunk.
std::pair<int64_t, int64_t> sub_chunk(const Chunks& chunks, int64_t i, int64_t S) {
  if (static_cast<int64_t>(chunks.size()) == S) return chunks[i];
  const int64_t len = chunks[0].second / S;
  return {chunks[0].first + i * len, len};
}

// K|V travels in S sub-blocks of len rows: a causal rank's two chunks, or
// the two halves of a contiguous block (one when n is odd). A rank holds
// S + 1 of them (attended and sent, next, arriving) instead of two whole
// blocks. Sub-block layout: K [B, len, G*dh] then V [B, len, G*dv].
struct KvLayout {
  int64_t S = 1, len = 0, k_bytes = 0, bytes = 0;
  KvLayout(const AttentionSpec& s, int64_t B, int64_t n, std::size_t es)
      : S(n % 2 == 0 ? 2 : 1), len(n / S), k_bytes(B * len * s.num_kv_heads * s.head_dim * static_cast<int64_t>(es)),
        bytes(k_bytes + B * len * s.num_kv_heads * s.head_dim_v * static_cast<int64_t>(es)) {}
};

// This rank's projections: q [B, n, H*dh] and its S K|V sub-blocks into
// buf[0 .. S), rotated at the rows' true positions.
void project_rows_of(Backend& be, const RingWork& w, const KvLayout& kv, Tensor& q, std::vector<std::vector<uint8_t>>& buf) {
  const AttentionSpec& s = w.spec;
  const DType dt = be.arithmetic_dtype();
  const std::size_t es = dtype_size(dt);
  const int64_t B = w.x.dim(0), n = w.x.dim(1), E = w.x.dim(2);
  const int64_t H = s.num_heads, G = s.num_kv_heads, kw = G * s.head_dim, vw = G * s.head_dim_v;
  std::optional<RopeTable> rope;
  if (s.rope) {
    AttentionInputs at;
    at.query = w.x;
    at.positions = w.positions;
    rope = rope_table(s, at);
  }
  be.project_rows(s.q, w.x.raw(), B * n, q.raw());
  const RopeTable* t = rope ? &*rope : nullptr;
  prepare_rows(s, t, false, dt, q.raw(), H * s.head_dim, 0, B * n, H);
  for (int64_t i = 0; i < kv.S; ++i)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t r0 = b * n + i * kv.len;
      const uint8_t* x = w.x.raw() + r0 * E * es;
      uint8_t* K = buf[i].data() + b * kv.len * kw * es;
      be.project_rows(s.k, x, kv.len, K);
      prepare_rows(s, t, true, dt, K, kw, r0, kv.len, G);
      be.project_rows(s.v, x, kv.len, buf[i].data() + kv.k_bytes + b * kv.len * vw * es);
    }
}

// One rank's ring pass; returns its output rows [B, n, out_dim] (nbytes
// bytes, in w.scratch). A rank's peak is about q + acc + 1.5 K|V blocks (x
// [B, n, E] too unless this is the last pass, which frees it after the
// projection, and the K|V blocks before the output projection): 1/N of a
// one-process run's. Every buffer is agreed on before the first block
// travels, so nothing fails once blocks travel.
const uint8_t* ring_pass(Backend& be, RingWork& w, int64_t me, int64_t N, bool last, std::size_t& nbytes) {
  const AttentionSpec& s = w.spec;
  const DType dt = be.arithmetic_dtype();
  const int64_t B = w.x.dim(0), n = w.x.dim(1), H = s.num_heads, dv = s.head_dim_v;
  const KvLayout kv(s, B, n, dtype_size(dt));
  const MaskRule rule(s);
  RingScratch& r = w.scratch;
  collectively([&] {
    if (r.q.ndim() == 0) r.q = Tensor(dt, {B, n, H * s.head_dim});
    r.buf.resize(kv.S + 1);
    for (int64_t i = 0; i < kv.S; ++i) r.buf[i].resize(kv.bytes);
  });
  project_rows_of(be, w, kv, r.q, r.buf);
  if (last) w.x = Tensor();  // no later pass projects it again
  collectively([&] {
    if (r.state.acc.ndim() == 0) r.state = SoftmaxState::empty(dt, B, n, H, dv);
    else r.state.reset();
    r.buf[kv.S].resize(kv.bytes);
  });

  const Chunks mine = ring_chunks(w.L, me, N, s.causal);
  // Sub-step t attends sub-block t % S of rank (me - t / S)'s keys, from
  // buf[t % (S + 1)], while sending it on to rank me + 1 (which attends it
  // at t + S) and receiving into the buffer attended at t - 1 the
  // sub-block this rank attends at t + S.
  for (int64_t t = 0; t < N * kv.S; ++t) {
    const uint8_t* cur = r.buf[t % (kv.S + 1)].data();
    RingExchange ex;
    if (t + kv.S < N * kv.S)
      ex.start(cur, r.buf[(t + kv.S) % (kv.S + 1)].data(), kv.bytes, static_cast<int>((me + 1) % N),
               static_cast<int>((me + N - 1) % N));
    const auto [ks, kl] = sub_chunk(ring_chunks(w.L, (me + N - t / kv.S) % N, N, s.causal), t % kv.S, kv.S);
    const KeyBlock keys{cur, cur + kv.k_bytes, kl, ks};
    int64_t row0 = 0;
    for (const auto& [qs, ql] : mine) {
      // A chunk pair no query can see is skipped.
      if (ks + kl > rule.first_key(qs) && ks < rule.end_key(qs + ql, w.L))
        be.attend_partial(s, r.q, QueryBlock{row0, ql, qs}, keys, r.state);
      row0 += ql;
    }
    ex.wait();
  }

  // context = acc / l, then this rank's rows of the output projection,
  // into q's storage when they fit (q is read no more).
  if (last) std::vector<std::vector<uint8_t>>().swap(r.buf);
  normalise_state(r.state);
  if (!w.out) {
    nbytes = r.state.acc.nbytes();
    return r.state.acc.raw();
  }
  nbytes = static_cast<std::size_t>(B * n * w.out->weight.dim(0)) * dtype_size(dt);
  if (nbytes > r.q.nbytes()) collectively([&] {
      if (r.y.ndim() == 0) r.y = Tensor(dt, {B, n, w.out->weight.dim(0)});
    });
  uint8_t* y = nbytes > r.q.nbytes() ? r.y.raw() : r.q.raw();
  be.project_rows(*w.out, r.state.acc.raw(), B * n, y);
  return y;
}

// One pass on every rank. Rank 0 hands its rows and then each other
// rank's, as they arrive, to `sink` (nullptr: received and dropped, for the
// timed passes before the last), so it never holds more than two ranks'
// rows; a failure there (a full disk) is agreed on after every rank's rows
// are in, so no rank is left waiting to send.
void pass(Backend& be, RingWork& w, bool last, OutputSink* sink) {
  const int64_t me = rank(), N = size();
  std::size_t nbytes = 0;
  const uint8_t* y = ring_pass(be, w, me, N, last, nbytes);
  if (me != 0) {
    send_bytes(y, static_cast<int64_t>(nbytes), 0);  // from the scratch: no copy beside q and acc
    if (last) w.scratch = RingScratch();
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
  deliver(y, 0);
  if (last) w.scratch = RingScratch();
  for (int64_t r = 1; r < N; ++r) {
    // A pass with no sink keeps its buffers for the next: the rows go
    // through one small piece instead of beside them.
    std::string rows;
    const int64_t got = sink ? static_cast<int64_t>((rows = recv_bytes(static_cast<int>(r))).size())
                             : recv_bytes_dropped(static_cast<int>(r));
    if (got != static_cast<int64_t>(nbytes) && err.empty()) err = "rank " + std::to_string(r) + " sent a wrong-sized block";
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

// What can be refused once the spec and inputs are in the backend's view.
void check_inputs(const Backend& backend, const AttentionSpec& spec, const AttentionInputs& inputs) {
  if (inputs.mask) refuse("an explicit mask is not split across ranks (causal and window are)");
  if (spec.extra_keys() > 0) refuse("bias_k / add_zero_attn add key rows outside the sequence");
  if (inputs.training && spec.dropout > 0.0) refuse("training-mode dropout is not split across ranks");
  if (!same_data(inputs.query, inputs.key) || !same_data(inputs.query, inputs.value))
    refuse("ring attention is self-attention: query, key and value must be the same tensor");
  require_supported(backend, spec, inputs);
}

// Sends rank r > 0 its work, one message at a time so that rank 0 holds its
// rows and one other rank's; a failure still sends (an empty message, which
// that rank fails to decode) so that nobody waits, and all ranks agree on it.
// Returns rank 0's own work.
template <class WorkFor>
RingWork distribute(WorkFor&& work_for, int64_t L, bool causal, DType dt, const Fault& fault) {
  std::string err;
  for (int64_t r = 1; r < size(); ++r) {
    std::string msg;
    if (err.empty() && r != fault.bad_shape_rank) try {
        msg = encode_ring(work_for(r));
      } catch (...) {
        err = error_of(std::current_exception());
      }
    send_bytes(msg, static_cast<int>(r));
  }
  RingWork mine;
  collectively([&] {
    if (!err.empty()) throw InputError(err);
    mine = work_for(0);
    if (mine.source.kind != RowSourceKind::Sent) mine.x = source_rows(mine.source, ring_chunks(L, 0, size(), causal), dt);
  });
  return mine;
}

nlohmann::json parallel_info(const std::optional<RowSource>& rows, bool need_whole) {
  const std::vector<int64_t> stats = gather_rank_stats();
  const int64_t N = size();
  std::vector<int64_t> sent(N), peak(N);
  for (int64_t r = 0; r < N; ++r) sent[r] = stats[2 * r], peak[r] = stats[2 * r + 1];
  return {{"mode", "sequence"},
          {"ranks", N},
          {"bytes_sent_per_rank", sent},
          {"peak_rss_bytes_per_rank", peak},
          {"input", !rows                               ? "whole on rank 0"
                    : rows->kind == RowSourceKind::Sent ? "rows read by rank 0 per rank"
                                                        : "rows drawn by each rank"},
          {"output", need_whole ? "whole on rank 0" : "rows written as they arrive"}};
}

}  // namespace

void check_ring_request(const PreparedRun& prepared, const Backend& backend, const RunRequest& request) {
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
  if (auto why = backend.supports(Capability::PartialAttention, prepared.spec))
    refuse("backend " + backend.name() + " cannot run ring attention (" + *why + ")");
}

Chunks ring_chunks(int64_t L, int64_t part, int64_t parts, bool causal) {
  if (parts == 1) return {{0, L}};  // one rank holds every row: nothing to split, any length runs
  const int64_t pieces = causal ? 2 * parts : parts;
  if (L % pieces != 0)
    refuse(std::to_string(L) + " tokens do not split into " + std::to_string(pieces) + " equal " +
           (causal ? "chunks (a causal ring takes 2 per rank)" : "blocks"));
  const int64_t c = L / pieces;
  if (!causal) return {{part * c, c}};
  return {{part * c, c}, {(2 * parts - 1 - part) * c, c}};
}

RunReport run_ring(PreparedRun& prepared, const RingInput& input, Backend& backend, const RunRequest& request,
                   WorkerRelease& release, const Fault& fault) {
  if (prepared.input_state != InputState::Ready) throw std::logic_error("run_ring: the run's inputs are not prepared");
  const std::optional<RowSource>& rows = input.rows;
  auto f32 = backend_view(prepared, backend);
  const AttentionSpec& spec = f32 ? f32->first : prepared.spec;
  const AttentionInputs& inputs = f32 ? f32->second : prepared.inputs;
  check_inputs(backend, spec, inputs);
  const Shape x_shape = rows ? rows->shape : inputs.query.shape();
  const int64_t N = size(), B = x_shape[0], L = x_shape[1];
  ring_chunks(L, 0, N, spec.causal);  // refuses an uneven split before the workers start

  const int64_t warmup = request.warmup.value_or(prepared.config.warmup);
  const int64_t iterations = request.iterations.value_or(prepared.config.iterations);
  const DType dt = backend.arithmetic_dtype();
  RingWork base;
  base.backend = prepared.config.backend;
  base.backend_options = prepared.config.backend_options.dump();
  base.passes = pass_count(warmup, iterations);
  base.L = L;
  base.spec = spec;
  base.spec.out.reset();
  base.spec.qkv_fused.reset();
  for (Projection* p : {&base.spec.q, &base.spec.k, &base.spec.v}) *p = Projection{p->weight.cast(dt), cast_opt(p->bias, dt)};
  if (spec.out) base.out = Projection{spec.out->weight.cast(dt), cast_opt(spec.out->bias, dt)};
  // Rank r's work: its rows read here (a .npy source, or the whole input),
  // or drawn by the rank itself (rand / randn).
  auto work_for = [&](int64_t r) {
    const Chunks chunks = ring_chunks(L, r, N, spec.causal);
    RingWork w = base;
    if (!rows) w.x = take_rows(inputs.query.cast(dt), chunks);
    else if (rows->kind == RowSourceKind::Sent) w.x = source_rows(*rows, chunks, dt);
    else w.source = *rows;
    w.positions = inputs.positions && !rows ? take_rows(*inputs.positions, chunks) : chunk_positions(chunks);
    return w;
  };
  release.go(WorkerMode::Sequence);
  RingWork mine = distribute(work_for, L, spec.causal, dt, fault);

  // The output: whole on rank 0 only when something needs it (ring_io.h).
  const int64_t out_dim = spec.out_dim();
  const bool need_whole = !rows || prepared.config.reference || B * L * out_dim <= kWholeOutputElements;
  OutputSink sink({B, L, out_dim}, dt, need_whole, rows ? request.output_file : "");
  RunReport rep;
  rep.backend_name = backend.name();
  {
    AttentionInputs dims = inputs;  // attention_flops reads [B, L] only
    if (rows) dims.query = dims.key = dims.value = Tensor(dt, {B, L, 0});
    rep.timing.flops = attention_flops(spec, dims);
  }
  time_passes(rep.timing, warmup, iterations, [&](const Pass& p) { pass(backend, mine, p.last, p.last ? &sink : nullptr); });
  sink.close();
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  rep.backend_info["parallel"] = parallel_info(rows, need_whole);
  rep.output_written = rows && !request.output_file.empty();
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
    std::unique_ptr<Backend> backend;
    collectively([&] {
      w = decode_ring(recv_bytes(0));
      backend = make_backend(w.backend, nlohmann::ordered_json::parse(w.backend_options), "backend");
      if (w.source.kind != RowSourceKind::Sent)
        w.x = source_rows(w.source, ring_chunks(w.L, rank(), size(), w.spec.causal), backend->arithmetic_dtype());
    });
    for (int64_t p = 0; p < w.passes; ++p) pass(*backend, w, p + 1 == w.passes, nullptr);
    gather_rank_stats();
  } catch (const InputError&) {
    return 2;  // rank 0 reports it
  }
  return 0;
}

}  // namespace mha::parallel
