// tt-sim's SDPA attention path (backends/ttsim/ttsim_sdpa.h): the op
// sequence of tt_transformers' Llama attention, prefill and KV-cache decode,
// against the cpu backend stage by stage, decode against a causal prefill of
// the same tokens, the option's defaults and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/backend.h"
#include "compare/compare.h"
#include "init/torch_generator.h"
#include "run/stage_compare.h"
#include "support/test_support.h"
#include "variants/variant.h"

using namespace mha;
using namespace mha::test;

namespace {

struct Built {
  std::unique_ptr<Variant> v;
  AttentionSpec spec;
  AttentionInputs in;
};

// A llama_attention layer (no sliding window) with torch-initialised weights
// and randn hidden states [batch, seq, hidden].
Built llama(int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t batch, int64_t seq,
            bool bias = false) {
  Built b;
  b.v = make_variant("llama_attention", ordered_json{{"hidden_size", hidden},
                                                     {"num_attention_heads", heads},
                                                     {"num_key_value_heads", kv_heads},
                                                     {"head_dim", head_dim},
                                                     {"rope_theta", 500000.0},
                                                     {"attention_bias", bias},
                                                     {"sliding_window", nullptr}});
  ForwardOptions opt;
  TensorMap w = bind_weights(*b.v, b.v->init_torch(0), "init");
  b.spec = b.v->build_spec(w, opt);
  TorchGenerator gen(1);
  TensorMap inputs;
  inputs["x"] = gen.randn({batch, seq, hidden});
  b.in = b.v->build_inputs(inputs, opt);
  return b;
}

std::unique_ptr<Backend> ttsim(const ordered_json& extra = ordered_json::object()) {
  ordered_json o = {{"threads", 2}};
  o.update(extra);
  return make_backend("tt-sim", o, "backend");
}

double pcc(const Tensor& ref, const Tensor& out) { return compare::compare(ref, out, compare::Options{}).pcc; }

}  // namespace

// Every decode step's output on tt-sim against the cpu backend's after the
// same synthetic cache (both backends fill it with the same values; tt-sim
// holds them in its bfloat16 cache here): the decode ops alone (QKV linear,
// nlp_create_qkv_heads_decode, rotary, paged_update_cache, SDPA decode,
// concat heads, output linear), no prefill involved.
TEST(TtSimSdpa, DecodeStepsTrackCpuAfterASyntheticCache) {
  Built b = llama(256, 8, 2, 32, 2, 6);
  DecodeOptions opt;
  opt.batch = 2;
  opt.max_tokens = 80;
  auto cpu = make_backend("cpu", ordered_json::object(), "backend");
  auto tt = ttsim({{"kv_cache_dtype", "bfloat16"}});
  ASSERT_FALSE(tt->supports_decode(b.spec)) << *tt->supports_decode(b.spec);
  auto sc = cpu->start_decode(b.spec, opt), st = tt->start_decode(b.spec, opt);
  sc->fill_synthetic(70, 5);
  st->fill_synthetic(70, 5);
  for (int64_t i = 0; i < 6; ++i) {
    Tensor x(DType::F32, {2, 1, 256});
    for (int64_t bb = 0; bb < 2; ++bb)
      std::copy_n(b.in.query.data<float>() + (bb * 6 + i) * 256, 256, x.data<float>() + bb * 256);
    Tensor yc = sc->append(x), yt = st->append(x);
    EXPECT_GT(pcc(yc, yt), 0.99) << "step " << i;
  }
  EXPECT_EQ(st->length(), 76);
}
