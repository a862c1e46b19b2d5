#pragma once
// `init: torch` / `init: rand` weights of each seed module: the state_dict
// that constructing the module right after torch.manual_seed(S) gives in
// PyTorch 1.13 on x86-64, bit for bit. Each function draws from the
// generator it is given, in the module's construction order (with the
// nn.init draws of init/torch_init.h), and returns float32 tensors named and
// ordered as module.state_dict() lists them. Seed the generator first:
//   TorchGenerator gen(seed); NamedTensors w = init_book_mha(gen, 3, 2, 2, false);
// Bad sizes (negative, or heads that do not divide the width where the seed
// module rejects it) throw InputError. Each is defined beside its variant,
// in the file named above it.
#include <cstdint>

#include "init/torch_generator.h"
#include "tensor/tensor.h"

namespace mha {

// --- book_variants.cpp
// Seeds 000/003 CausalAttention(d_in, d_out, ..., qkv_bias):
// W_query.weight (d_out, d_in) [, W_query.bias (d_out)], then W_key.*, W_value.*.
// Seed 003 names them W_q/W_k/W_v; the draws are the same.
NamedTensors init_causal_attention(TorchGenerator& gen, int64_t d_in, int64_t d_out, bool qkv_bias);

// MultiHeadAttentionWrapper: heads.{i}.W_query.* ... for i < num_heads, each
// head a CausalAttention drawn in turn.
NamedTensors init_mha_wrapper(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                              bool qkv_bias);

// Book MultiHeadAttention: W_query.*, W_key.*, W_value.* as CausalAttention,
// then out_proj.weight (d_out, d_out), out_proj.bias (d_out) (always biased;
// seed 003 names it output_projection). num_heads does not affect the draws.
NamedTensors init_book_mha(TorchGenerator& gen, int64_t d_in, int64_t d_out, int64_t num_heads,
                           bool qkv_bias);

// --- aiedge_variants.cpp
// Seed 001 MultiHeadAttention(d_model, n_head): Q, K, V, O, each
// .weight (d, d) and .bias (d). Throws if n_head does not divide d_model.
NamedTensors init_mha_001(TorchGenerator& gen, int64_t d_model, int64_t n_head);

// Seed 001 MultiHeadAttentionV2: qkv_linear.weight (3d, d), qkv_linear.bias
// (3d), O.weight (d, d), O.bias (d).
NamedTensors init_mha_v2_001(TorchGenerator& gen, int64_t d_model, int64_t n_head);

// --- torch_mha.cpp
struct TorchMhaParams {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  bool bias = true;
  bool add_bias_kv = false;
  int64_t kdim = -1;  // -1: embed_dim, as kdim=None
  int64_t vdim = -1;
};

// torch.nn.MultiheadAttention(embed_dim, num_heads, bias=, add_bias_kv=,
// kdim=, vdim=). Draw order: out_proj's own nn.Linear init (weight, then
// bias if bias), then xavier_uniform_ on in_proj_weight (3E, E), or on
// q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim)
// when kdim or vdim differs from E; then biases zeroed; then xavier_normal_
// on bias_k and bias_v (1, 1, E). state_dict order:
// in_proj_weight | q/k/v_proj_weight, [in_proj_bias (3E)], [bias_k, bias_v],
// out_proj.weight (E, E), [out_proj.bias (E)].
NamedTensors init_torch_mha(TorchGenerator& gen, const TorchMhaParams& p);

// --- ttnn_variants.cpp
// ttnn variants, `init: torch` (seed 000's MultiHeadAttention_ttnn style):
// nn.Linear(h, h) for query, key, value, output in that order, weights
// stored transposed (in x out, used as x @ W): query_weight (h, h),
// query_bias (h), key_*, value_*, output_weight, output_bias.
NamedTensors init_ttnn_torch(TorchGenerator& gen, int64_t hidden_size);

// ttnn variants, `init: rand`: torch.rand for each of query_weight (h, h),
// query_bias (h), key_*, value_*, output_* in that order (seed 002's list).
NamedTensors init_ttnn_rand(TorchGenerator& gen, int64_t hidden_size);

// ttnn_mha_fused weights from ttnn_mha ones: fused_qkv_weight (h, 3h) =
// [query | key | value] on the last dim, fused_qkv_bias (3h) likewise,
// self_output_weight, self_output_bias. Draws nothing.
NamedTensors fuse_ttnn_qkv(const NamedTensors& ttnn_weights);

}  // namespace mha
