// A variant keeps no state between build_inputs and finish: what finish
// needs about a call travels in that call's AttentionInputs. torch_mha's
// unbatched call (2-D query) is the case that once kept a flag in the
// variant object, so two calls in flight on one object crossed it.
#include <gtest/gtest.h>

#include "backends/reference/reference_backend.h"
#include "init/torch_generator.h"
#include "support/test_support.h"
#include "variants/variant.h"

using namespace mha;

namespace {

// Sample n of a batch_first=False tensor [L, N, E] as [L, E], same dtype.
Tensor sample(const Tensor& t, int64_t n) {
  const int64_t L = t.dim(0), N = t.dim(1), E = t.dim(2);
  const std::vector<double> x = t.to_f64();
  std::vector<double> o(static_cast<size_t>(L * E));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t e = 0; e < E; ++e) o[i * E + e] = x[(i * N + n) * E + e];
  return Tensor::from_f64({L, E}, o).cast(t.dtype());
}

TEST(VariantState, TorchMhaUnbatchedThenBatchedOnOneObject) {
  const int64_t L = 5, N = 3, E = 8;
  auto v = make_variant("torch_mha", ordered_json{{"embed_dim", E}, {"num_heads", 2}});
  ForwardOptions opt = v->parse_options(ordered_json{{"need_weights", true}});
  TensorMap w = bind_weights(*v, v->init_torch(3), "init");
  const AttentionSpec spec = v->build_spec(w, opt);
  TorchGenerator gen(11);
  const Tensor x3 = gen.rand({L, N, E});
  const Tensor x2 = sample(x3, 1);
  Tensor kpm2(DType::Bool, {L}), kpm3(DType::Bool, {N, L});  // zero-filled: all keys visible
  kpm2.raw()[L - 1] = 1;  // the unbatched sample hides its last key, as sample 1 does
  kpm3.raw()[1 * L + L - 1] = 1;

  // Both calls mapped before either is finished: the batched call must not
  // turn the unbatched one's finish into a batched one, or back.
  const AttentionInputs in2 = v->build_inputs({{"query", x2}, {"key", x2}, {"value", x2}, {"key_padding_mask", kpm2}}, opt);
  const AttentionInputs in3 = v->build_inputs({{"query", x3}, {"key", x3}, {"value", x3}, {"key_padding_mask", kpm3}}, opt);
  auto ref = make_reference_backend();
  RunOptions ro;
  ro.need_weights = true;
  const AttentionResult r2 = v->finish(ref->run(spec, in2, ro), opt, in2);
  const AttentionResult r3 = v->finish(ref->run(spec, in3, ro), opt, in3);
  const AttentionResult r2_again = v->finish(ref->run(spec, in2, ro), opt, in2);

  EXPECT_EQ(r2.output.shape(), (Shape{L, E}));
  ASSERT_TRUE(r2.weights.has_value());
  EXPECT_EQ(r2.weights->shape(), (Shape{L, L}));
  EXPECT_EQ(r3.output.shape(), (Shape{L, N, E}));
  ASSERT_TRUE(r3.weights.has_value());
  EXPECT_EQ(r3.weights->shape(), (Shape{N, L, L}));
  EXPECT_EQ(r2_again.output.shape(), (Shape{L, E}));
  // The unbatched call is sample 1 of the batched one, padding included.
  EXPECT_TRUE(test::tensors_close(r2.output, sample(r3.output, 1), 1e-12, 0));
}

}  // namespace
