// A backend that lives only here, outside src/: "toy" implements the
// partial-attention primitive (backends/partial.h) in plain float32 loops
// and nothing else (its run() is its own primitive over the whole
// sequence). Registered with register_backend, it runs a ring under mpirun
// with no line of src/parallel/ knowing it, and matches its own one-process
// run within the ring's documented float32 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>

#include "backends/backend.h"
#include "backends/registry.h"
#include "config/config.h"
#include "model/mask.h"
#include "parallel/world.h"
#include "parallel/driver.h"
#include "mpirun_support.h"
#include "support/test_support.h"

namespace mha {
namespace {

class ToyBackend : public Backend {
 public:
  std::string name() const override { return "toy"; }
  std::optional<std::string> supports(const AttentionSpec& spec, const AttentionInputs& in) const override {
    if (in.mask || spec.extra_keys() || spec.rope || (in.training && spec.dropout > 0)) return "toy: plain attention only";
    return std::nullopt;
  }

  void project_rows(const Projection& p, const void* x, int64_t rows, void* y) override {
    const int64_t in = p.weight.dim(1), out = p.weight.dim(0);
    const float* xs = static_cast<const float*>(x);
    float* ys = static_cast<float*>(y);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        float s = p.bias ? p.bias->data<float>()[o] : 0.0f;
        for (int64_t i = 0; i < in; ++i) s += xs[r * in + i] * p.weight.data<float>()[o * in + i];
        ys[r * out + o] = s;
      }
  }

  // One key at a time: m' = max(m, s), rescale by 2^(m - m'), add 2^(s - m').
  void attend_partial(const AttentionSpec& spec, const Tensor& q, const QueryBlock& qb, const KeyBlock& kv,
                      SoftmaxState& st) override {
    const int64_t B = q.dim(0), n = q.dim(1), H = spec.num_heads, dh = spec.head_dim, dv = spec.head_dim_v;
    const int64_t group = H / spec.num_kv_heads, kw = spec.num_kv_heads * dh, vw = spec.num_kv_heads * dv;
    const MaskRule rule(spec);
    const float c1 = static_cast<float>(spec.scale * 1.4426950408889634);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < qb.rows; ++i)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t row = b * n + qb.row0 + i;
          float& m = st.m.data<float>()[row * H + h];
          float& l = st.l.data<float>()[row * H + h];
          float* acc = st.acc.data<float>() + (row * H + h) * dv;
          for (int64_t j = 0; j < kv.rows; ++j) {
            if (!rule.visible(qb.pos0 + i, kv.pos0 + j)) continue;
            const float* k = static_cast<const float*>(kv.k) + (b * kv.rows + j) * kw + h / group * dh;
            const float* v = static_cast<const float*>(kv.v) + (b * kv.rows + j) * vw + h / group * dv;
            float s = 0.0f;
            for (int64_t e = 0; e < dh; ++e) s += q.data<float>()[(row * H + h) * dh + e] * k[e];
            s *= c1;
            const float mnew = std::max(m, s), c = std::exp2(m - mnew), p = std::exp2(s - mnew);
            l = l * c + p;
            for (int64_t e = 0; e < dv; ++e) acc[e] = acc[e] * c + p * v[e];
            m = mnew;
          }
        }
  }

  AttentionResult run(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions&) override {
    validate_inputs(spec, in);
    const int64_t B = in.query.dim(0), L = in.query.dim(1), S = in.key.dim(1);
    auto project = [&](const Projection& p, const Tensor& x) {
      Tensor y(DType::F32, {x.dim(0), x.dim(1), p.weight.dim(0)});
      project_rows(p, x.raw(), x.dim(0) * x.dim(1), y.raw());
      return y;
    };
    const Tensor q = project(spec.q, in.query), k = project(spec.k, in.key), v = project(spec.v, in.value);
    SoftmaxState st = SoftmaxState::empty(DType::F32, B, L, spec.num_heads, spec.head_dim_v);
    attend_partial(spec, q, QueryBlock{0, L, 0}, KeyBlock{k.raw(), v.raw(), S, 0}, st);
    normalise_state(st);
    AttentionResult r;
    r.output = spec.out ? project(*spec.out, st.acc) : st.acc;
    return r;
  }

 protected:
  std::optional<std::string> capability_gap(Capability c, const AttentionSpec&) const override {
    if (c == Capability::PartialAttention) return std::nullopt;
    return std::string("no ") + capability_name(c);
  }
};

const bool g_registered = [] {
  register_backend("toy", "a test backend with partial attention", [](const nlohmann::ordered_json&, const std::string&) -> std::unique_ptr<Backend> {
    return std::make_unique<ToyBackend>();
  });
  return true;
}();

// MPI for the in-process test below comes from mpirun_test.cpp's MpiSession.

std::string toy_config(int ranks, bool causal) {
  const std::string model = causal ? R"("mha_causal", "params": {"d_in": 16, "d_out": 16, "context_length": 64, "num_heads": 4})"
                                   : R"("mha", "params": {"d_model": 16, "n_head": 4})";
  return R"({"variant": )" + model + R"(,
    "weights": {"init": "torch", "seed": 3}, "inputs": {"seed": 4, "x": {"randn": [2, 24, 16]}},
    "backend": "toy", "runs": {"iterations": 1})" +
         (ranks > 0 ? R"(, "parallel": {"sequence": )" + std::to_string(ranks) + "}}" : std::string("}"));
}

TEST(InsideMpirun, ToyBackendInTheRing) {
  if (!std::getenv("MHA_TEST_INSIDE_MPIRUN")) GTEST_SKIP() << "run by ToyBackend.JoinsTheRing";
  ASSERT_TRUE(g_registered);
  for (const bool causal : {false, true}) {
    if (parallel::rank() != 0) {
      EXPECT_EQ(serve_rank(), 0);
      continue;
    }
    auto backend = make_backend("toy", nlohmann::ordered_json::object(), "backend");
    PreparedRun one = prepare_for(parse_config(nlohmann::ordered_json::parse(toy_config(0, causal)), ".", "one"));
    const Tensor want = execute_run(one, *backend, {}).result.output;  // no rank is released for it
    parallel::WorkerRelease release;
    PreparedRun ring =
        prepare_for(parse_config(nlohmann::ordered_json::parse(toy_config(parallel::size(), causal)), ".", "ring"));
    const RunReport rep = drive_run(ring, *backend, {}, release);
    EXPECT_EQ(rep.backend_info["parallel"]["mode"], "sequence");
    EXPECT_TRUE(test::tensors_close(rep.result.output, want, 2e-6, 1e-5)) << "causal " << causal;
  }
}

TEST(ToyBackend, JoinsTheRing) {
  REQUIRE_MPI();
  for (int ranks : {1, 2, 3}) {
    auto r = test::run_command("MHA_TEST_INSIDE_MPIRUN=1 " + test::mpirun(ranks) +
                               std::filesystem::read_symlink("/proc/self/exe").string() +
                               " --gtest_filter=InsideMpirun.ToyBackendInTheRing 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
}

TEST(ToyBackend, OneProcessWithoutMpirun) {
  auto backend = make_backend("toy", nlohmann::ordered_json::object(), "backend");
  EXPECT_EQ(backend->supports(Capability::OutputProjection, AttentionSpec()),
            std::optional<std::string>("no separate output projection"));
  PreparedRun one = prepare_for(parse_config(nlohmann::ordered_json::parse(toy_config(0, true)), ".", "one"));
  auto ref = make_backend("reference", nlohmann::ordered_json::object(), "backend");
  const Tensor got = execute_run(one, *backend, {}).result.output;
  const Tensor want = execute_run(one, *ref, {}).result.output;
  EXPECT_TRUE(test::tensors_close(got.cast(DType::F64), want, 1e-5, 1e-4)) << "toy is float32 attention";
}

}  // namespace
}  // namespace mha
