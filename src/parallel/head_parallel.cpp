#include "parallel/head_parallel.h"

#include <cstring>
#include <new>

#include "parallel/collective.h"
#include "parallel/wire.h"
#include "parallel/world.h"
#include "run/passes.h"
#include "util/error.h"

namespace mha::parallel {

namespace {

Tensor rows_of(const Tensor& t, int64_t start, int64_t count) {
  const int64_t row = t.numel() / t.dim(0);
  Shape shape = t.shape();
  shape[0] = count;
  Tensor r(t.dtype(), shape);
  const std::size_t es = dtype_size(t.dtype());
  std::memcpy(r.raw(), t.raw() + start * row * es, count * row * es);
  return r;
}

// mask [Bm, H, Lm, St] -> [Bm, count, Lm, St], heads [start, start + count).
Tensor mask_heads(const Tensor& m, int64_t start, int64_t count) {
  const int64_t Bm = m.dim(0), Hm = m.dim(1), inner = m.dim(2) * m.dim(3);
  const std::size_t es = dtype_size(m.dtype());
  Tensor r(m.dtype(), {Bm, count, m.dim(2), m.dim(3)});
  for (int64_t b = 0; b < Bm; ++b)
    std::memcpy(r.raw() + b * count * inner * es, m.raw() + (b * Hm + start) * inner * es, count * inner * es);
  return r;
}

struct Work {
  std::string backend;
  std::string backend_options;  // JSON text
  int64_t passes = 1;
  AttentionSpec spec;
  AttentionInputs inputs;
};

std::string encode(const Work& w) {
  Writer out;
  out.str(w.backend);
  out.str(w.backend_options);
  out.i64(w.passes);
  write_spec(out, w.spec);
  write_inputs(out, w.inputs);
  return out.bytes();
}

Work decode(const std::string& bytes) {
  Reader in(bytes);
  Work w;
  w.backend = in.str();
  w.backend_options = in.str();
  w.passes = in.i64();
  w.spec = read_spec(in);
  w.inputs = read_inputs(in);
  return w;
}

// One forward pass of this rank's share; rank 0 gets the whole context
// [B, L, H*dv] (columns in head order), the others an empty tensor.
Tensor pass(Backend& backend, const Work& w) {
  AttentionResult local;
  RunOptions opt;
  opt.group_projections = true;  // one process's calls for these groups, whatever the split
  collectively([&] { local = backend.run(w.spec, w.inputs, opt); });
  const Tensor& c = local.output;  // [B, L, E_r]
  const std::string all = gather_bytes(std::string(reinterpret_cast<const char*>(c.raw()), c.nbytes()));
  if (rank() != 0) return Tensor();
  const int64_t n = size(), rows = c.dim(0) * c.dim(1);
  const std::size_t width = c.dim(2) * dtype_size(c.dtype());
  Tensor ctx(c.dtype(), {c.dim(0), c.dim(1), c.dim(2) * n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(ctx.raw() + (i * n + r) * width, all.data() + (r * rows + i) * width, width);
  return ctx;
}

}  // namespace

AttentionInputs inputs_share(const AttentionSpec& s, const AttentionInputs& in, int64_t part, int64_t parts) {
  AttentionInputs r = in;
  const int64_t h = s.num_heads / parts;
  if (in.mask && in.mask->dim(1) == s.num_heads && s.num_heads > 1) r.mask = mask_heads(*in.mask, part * h, h);
  return r;
}

RunReport run_heads(PreparedRun& prepared, Backend& backend, const RunRequest& request, WorkerRelease& release,
                    const Fault& fault) {
  const int64_t n = size();
  const ParallelConfig& pc = *prepared.config.parallel;
  if (pc.ranks != n)
    throw InputError("parallel.heads: the config asks for " + std::to_string(pc.ranks) + " ranks, but mha runs on " +
                     std::to_string(n) +
                     (mpi_built() ? " (start it with mpirun -np " + std::to_string(pc.ranks) + ")"
                                  : " (this mha was built without MPI: install OpenMPI and build with -DMHA_MPI=ON)"));
  if (request.need_weights || prepared.options.need_weights)
    throw InputError("parallel.heads: attention weights are not gathered across ranks; drop need_weights / --attn-weights");
  if (prepared.config.decode)
    throw InputError("parallel.heads: a decode run keeps one KV cache and is not split across ranks; drop \"decode\" or \"parallel\"");
  if (request.collect_stages)
    throw InputError("parallel.heads: stages are not gathered across ranks; drop --dump-stages / --compare-stages");
  auto f32 = backend_view(prepared, backend);
  const AttentionSpec& spec = f32 ? f32->first : prepared.spec;
  const AttentionInputs& inputs = f32 ? f32->second : prepared.inputs;
  if (inputs.training && spec.dropout > 0.0)
    throw InputError("parallel.heads: training-mode dropout draws per head index and is not split across ranks");
  if (spec.mla)
    throw InputError("parallel.heads: multi-head latent attention's latent projections serve every head and are not "
                     "split across ranks; run in one process");
  require_supported(backend, spec, inputs);
  if (spec.out)
    if (auto why = backend.supports(Capability::OutputProjection, spec))
      throw InputError("parallel.heads: backend " + backend.name() + " cannot run head-parallel (" + *why + ")");

  const int64_t warmup = request.warmup.value_or(prepared.config.warmup);
  const int64_t iterations = request.iterations.value_or(prepared.config.iterations);
  std::vector<std::string> messages;
  for (int64_t r = 0; r < n; ++r) {
    Work w;
    w.backend = prepared.config.backend;
    w.backend_options = prepared.config.backend_options.dump();
    w.passes = pass_count(warmup, iterations);
    w.spec = heads_share(spec, r, n);
    w.inputs = inputs_share(spec, inputs, r, n);
    if (r == fault.bad_shape_rank) w.inputs.query = rows_of(w.inputs.query, 0, w.inputs.query.dim(0) - 1);
    messages.push_back(encode(w));
  }
  release.go(WorkerMode::Heads);
  for (int64_t r = 1; r < n; ++r) send_bytes(messages[r], static_cast<int>(r));
  Work mine;
  collectively([&] { mine = decode(messages[0]); });  // the workers' setup
  messages.clear();

  RunReport rep;
  rep.backend_name = backend.name();
  rep.timing.flops = attention_flops(spec, inputs);
  Tensor output;
  time_passes(rep.timing, warmup, iterations, [&](const Pass&) {
    Tensor ctx = pass(backend, mine);
    collectively([&] { output = spec.out ? *backend.project_output(spec, ctx) : ctx; });
  });
  rep.cache = backend.cache_stats();
  rep.backend_info = backend.describe();
  const std::vector<int64_t> stats = gather_rank_stats();
  std::vector<int64_t> peak(n);
  for (int64_t r = 0; r < n; ++r) peak[r] = stats[2 * r + 1];
  rep.backend_info["parallel"] = {
      {"mode", "heads"}, {"ranks", n}, {"bytes_sent_rank0", bytes_sent()}, {"peak_rss_bytes_per_rank", peak}};
  AttentionResult result;
  result.output = output;
  rep.result = prepared.variant->finish(std::move(result), prepared.options, inputs);
  rep.comparison = compare_with_reference(prepared.config, rep.result.output);
  return rep;
}

int serve_heads() {
  try {
    Work w;
    std::unique_ptr<Backend> backend;
    collectively([&] {
      w = decode(recv_bytes(0));
      backend = make_backend(w.backend, nlohmann::ordered_json::parse(w.backend_options), "backend");
    });
    for (int64_t p = 0; p < w.passes; ++p) {
      pass(*backend, w);
      collectively([] {});  // rank 0's output projection
    }
    gather_rank_stats();
  } catch (const InputError&) {
    return 2;  // rank 0 reports it
  }
  return 0;
}

}  // namespace mha::parallel
