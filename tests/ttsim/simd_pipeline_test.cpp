// Whole ops and whole pipelines on the vector kernels against the scalar
// lane models (kernels "scalar"): softmax and the eltwise ops in every
// configuration, then seed 002's two pipelines stage by stage. Zero
// differing bits, on every instruction set this CPU runs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "backends/backend.h"
#include "init/torch_generator.h"
#include "tensor/half.h"
#include "ttsim/eltwise.h"
#include "ttsim/sfpu.h"
#include "util/thread_pool.h"
#include "variants/variant.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {

TileTensor random_tiles(std::mt19937& rng, const Shape& shape, DataFormat f, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = n(rng);
  return to_tile_layout(v.data(), shape, f);
}

}  // namespace

TEST(TtsimSimdOps, SoftmaxEveryConfiguration) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (simd::Isa isa : simd::vector_isas())
    for (bool approx : {true, false})
      for (bool fp32 : {false, true})
        for (TtMetal profile : {TtMetal::Latest, TtMetal::R2024})
          for (DataFormat in_f : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Float32}) {
            // 70 columns: the padded ones are masked before exp.
            TileTensor x = random_tiles(rng, {2, 3, 40, 70}, in_f, approx ? 4.0f : 20.0f);
            ComputeConfig cfg = softmax_default_config();
            cfg.math_approx_mode = approx;
            cfg.fp32_dest_acc_en = fp32;
            cfg.tt_metal = profile;  // the reciprocal: quadratic at latest, 1/ln2-seeded at 2024
            cfg.output = fp32 ? DataFormat::Float32 : DataFormat::Bfloat16;
            TileTensor want, got;
            tt_softmax(x, want, cfg, Exec{simd::Isa::Scalar, nullptr});
            tt_softmax(x, got, cfg, Exec{isa, &pool});
            ASSERT_TRUE(same_bits(want.data, got.data)) << simd::isa_name(isa) << " approx=" << approx << " fp32=" << fp32
                                                        << " tt_metal=" << tt_metal_name(profile) << " in " << format_name(in_f);
          }
}

TEST(TtsimSimdOps, AddWithBroadcastAndScalarMultiply) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  for (simd::Isa isa : simd::vector_isas())
    for (bool fp32 : {false, true})
      for (DataFormat f : {DataFormat::Bfloat16, DataFormat::Bfp8_b, DataFormat::Float32}) {
        TileTensor a = random_tiles(rng, {2, 3, 40, 70}, f, 3.0f);
        for (const Shape& bs : {Shape{2, 3, 40, 70}, Shape{2, 1, 1, 70}, Shape{1, 70}}) {
          TileTensor b = random_tiles(rng, bs, DataFormat::Bfloat16, 3.0f);
          TileTensor want = make_tile_tensor(a.shape, f), got = make_tile_tensor(a.shape, f);
          tt_add(a, b, want, fp32, false, Exec{simd::Isa::Scalar, nullptr});
          tt_add(a, b, got, fp32, false, Exec{isa, &pool});
          ASSERT_TRUE(same_bits(want.data, got.data)) << simd::isa_name(isa) << " add " << shape_str(bs);
        }
        for (MathFidelity fid : {MathFidelity::LoFi, MathFidelity::HiFi2, MathFidelity::HiFi3, MathFidelity::HiFi4}) {
          TileTensor want = make_tile_tensor(a.shape, f), got = make_tile_tensor(a.shape, f);
          tt_mul_scalar(a, 0.125f + 1e-3f, want, fid, fp32, false, Exec{simd::Isa::Scalar, nullptr});
          tt_mul_scalar(a, 0.125f + 1e-3f, got, fid, fp32, false, Exec{isa, &pool});
          ASSERT_TRUE(same_bits(want.data, got.data)) << simd::isa_name(isa) << " multiply " << fidelity_name(fid);
        }
      }
}

// Seed 002's two pipelines (and variants of their compute config) at a
// reduced shape: every stage the backend reports, bit for bit.
TEST(TtsimSimdPipeline, Seed002PipelinesEveryStageBitForBit) {
  using ordered_json = nlohmann::ordered_json;
  const ordered_json extra[] = {ordered_json::object(),
                                {{"fp32_dest_acc_en", true}, {"math_approx_mode", false}},
                                {{"dtype", "bfloat4_b"}, {"math_fidelity", "HiFi4"}},
                                {{"fp32_dest_acc_en", true}, {"bfp8_pack_precise", true}}};
  for (const char* variant : {"ttnn_mha", "ttnn_mha_fused"})
    for (const ordered_json& opts : extra) {
      auto v = make_variant(variant, ordered_json{{"hidden_size", 256}, {"num_heads", 4}});
      ForwardOptions fo;
      TensorMap w = bind_weights(*v, v->init_torch(0), "init");
      AttentionSpec spec = v->build_spec(w, fo);
      TorchGenerator gen(0);
      TensorMap inputs;
      inputs["x"] = gen.rand({2, 64, 256});
      inputs["attention_mask"] = gen.rand({2, 1, 1, 64});
      AttentionInputs in = v->build_inputs(inputs, fo);
      RunOptions ro;
      ro.collect_stages = true;
      ordered_json scalar_opts = opts;
      scalar_opts["kernels"] = "scalar";
      AttentionResult want = make_backend("tt-sim", scalar_opts, "backend")->run(spec, in, ro);
      for (simd::Isa isa : simd::vector_isas()) {
        ordered_json o = opts;
        o["kernels"] = simd::isa_name(isa);
        AttentionResult got = make_backend("tt-sim", o, "backend")->run(spec, in, ro);
        ASSERT_EQ(want.stages.size(), got.stages.size());
        for (size_t i = 0; i < want.stages.size(); ++i) {
          SCOPED_TRACE(std::string(variant) + " " + opts.dump() + " " + simd::isa_name(isa) + " stage " +
                       want.stages[i].first);
          ASSERT_TRUE(same_bits(want.stages[i].second.to_f32(), got.stages[i].second.to_f32()));
        }
        ASSERT_TRUE(same_bits(want.output.to_f32(), got.output.to_f32()));
      }
    }
}
