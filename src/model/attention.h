#pragma once
// The one canonical description of multi-head attention that every variant
// maps onto and every backend executes.
//
//   Q = query @ wq^T + bq            query [B, L, q_in]   wq [H*dh,  q_in]
//   K = key   @ wk^T + bk            key   [B, S, k_in]   wk [Hkv*dh, k_in]
//   V = value @ wv^T + bv            value [B, S, v_in]   wv [Hkv*dv, v_in]
//   rope: Q and K rotated per head by their positions (model/rope.h),
//         after the projection and before the grouped heads are shared
//   (bias_k, bias_v appended as one more key/value row; then, with
//    add_zero_attn, one all-zero row: S_total = S + extras)
//   per head h (kv head h / (H / Hkv)):
//     scores  = scale * Q_h @ K_h^T + mask     [B, H, L, S_total]
//     causal: scores[i, j] = -inf for j > i (top-left aligned, as the seeds'
//             triu(ones(L, S), diagonal=1) mask)
//     window: scores[i, j] = -inf unless i - window < j (sliding window:
//             each query sees at most `window` keys, its own included,
//             as Mistral's sliding_window; model/mask.h)
//     weights = softmax(scores) (a row of all -inf gives NaN, as torch does)
//     ctx_h   = weights @ V_h                  [B, L, dv]
//   context = concat_h ctx_h                   [B, L, H*dv]
//   output  = context @ wo^T + bo               wo [E_out, H*dv]  (or context)
//
// Weights are float32 Tensors, as the PyTorch modules hold them, or float64
// when the weight file holds float64 (inputs likewise); backends convert to
// their own precision and layout when they build a plan, and the runner
// gives float32 to every backend but a float64 one (the reference).
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace mha {

struct Projection {
  Tensor weight;               // [out, in] float32 (or float64), applied as x @ weight^T
  std::optional<Tensor> bias;  // [out] float32 (or float64)
  // [in, out]: the same values as a module that computes x @ W stores them
  // (seed 002's TT-NN modules). A backend that multiplies by (in, out)
  // operands (tt-sim) uploads this as is instead of transposing `weight`
  // back; Tensors share their bytes, so keeping both costs nothing.
  std::optional<Tensor> weight_in_out = std::nullopt;
};

// The sequence of TT-NN ops a variant's module is written as: what tt-sim
// emulates op by op (backends/ttsim/ttsim_pipeline.h). The variant sets it;
// no backend looks at variant names.
enum class OpSequence {
  Book,          // seed 000's MultiHeadAttention_ttnn (the PyTorch-style modules)
  TtnnMha,       // seed 002's multi_head_attention: plain `@` and `+`
  TtnnMhaFused,  // seed 002's optimised version: fused QKV, attention_softmax_
};
const char* op_sequence_name(OpSequence s);

// How a device with TT-NN's fused attention kernels runs the module's
// attention core: Ops, the op sequence above one op at a time (matmul,
// softmax, add); Sdpa, TT-NN's transformer kernels as tt_transformers'
// Llama attention calls them (fused QKV linear, nlp_create_qkv_heads,
// rotary_embedding_llama, fill_cache / paged_update_cache, SDPA or SDPA
// decode, nlp_concat_heads, output linear). The variant sets the module's
// default; tt-sim's "attention" option overrides it where both apply.
enum class AttentionKernel { Ops, Sdpa };
const char* attention_kernel_name(AttentionKernel k);

// A fresh identity per constructed spec, so that backends can key plan
// caches on it (addresses get reused; copies are identical so share it).
uint64_t new_spec_uid();

// How a model stretches its rotary frequencies for longer contexts
// (Hugging Face's rope_scaling "rope_type").
enum class RopeScaling {
  None,    // "default": inv_freq = theta^(-2i/d)
  Linear,  // positions divided by `factor`
  Llama3,  // Llama 3.1's per-band scaling (factor, low/high_freq_factor, original_max_positions)
  Yarn,    // YaRN (factor, beta_fast/slow, original_max_positions, truncate, attention_factor)
};
const char* rope_scaling_name(RopeScaling s);

// Rotary position embedding as Hugging Face's decoder layers apply it: a
// typed description, so a backend needs no variant name to run it.
// model/rope.h computes it (frequencies, scalings, the rotation).
struct RotaryEmbedding {
  double theta = 10000.0;  // rope_theta; used as float32, as the modules do
  // Rotated width per head: 0 (or head_dim) rotates the whole head; less
  // rotates the leading rotary_dim dims and passes the rest through
  // (partial_rotary_factor). Even.
  int64_t rotary_dim = 0;
  // false: rotate_half pairs (i, i + d/2), as Llama; true: adjacent pairs
  // (2i, 2i + 1), as DeepSeek's rope_interleave.
  bool interleaved = false;
  RopeScaling scaling = RopeScaling::None;
  double factor = 1.0;                  // Linear, Llama3, Yarn
  double low_freq_factor = 1.0;         // Llama3
  double high_freq_factor = 4.0;        // Llama3
  int64_t original_max_positions = 0;   // Llama3, Yarn
  double beta_fast = 32.0, beta_slow = 1.0;  // Yarn
  bool truncate = true;                 // Yarn: round the correction range to whole dims
  // cos and sin are multiplied by it (YaRN's mscale, 0.1 ln(factor) + 1
  // unless the config gives attention_factor); 1 for the other scalings.
  double attention_factor = 1.0;
};

// Per-head RMSNorm of q and k over head_dim, after the projection and before
// the rotary embedding (Qwen3, Gemma 3): x * rsqrt(mean(x^2) + eps) * w,
// or * (1 + w) with `offset_one` (Gemma's RMSNorm).
struct QkNorm {
  Tensor q_weight;  // [head_dim] float32 (or float64)
  Tensor k_weight;  // [head_dim]
  double eps = 1e-6;
  bool offset_one = false;
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): q and the keys and
// values come from low-rank projections with RMSNorms of their own, and
// every head's key ends in one rotated part shared by all heads. The
// expanded form (model/mla.h computes it), with dn = nope_dim, dr =
// rope_dim, dv = head_dim_v and spec q, k (= v) the input's projections:
//   q    = rmsnorm(x @ q^T, q_norm) @ q_b^T    [B, L, H*(dn + dr)]  (no q_b: x @ q^T)
//   ckv  = x @ k^T                             [B, S, kv_lora_rank + dr]
//   c    = rmsnorm(ckv[:kv_lora_rank], kv_norm), kr = ckv[kv_lora_rank:]
//   kv   = c @ kv_b^T                          [B, S, H*(dn + dv)]: head h is [k_nope_h | v_h]
//   rope (spec.rope, rotary_dim dr) on each q head's last dr and on kr;
//   key_h = [k_nope_h | kr], value_h = v_h
// then the attention above with num_kv_heads = H and head_dim = dn + dr.
// The absorbed form (decode over a latent cache of [c | kr] per token, the
// same values): q_nope_h @ W_kb_h joins c, and V = c @ W_vb_h^T after the
// softmax (W_kb_h, W_vb_h: head h's dn and dv rows of kv_b).
struct Mla {
  int64_t q_lora_rank = 0;  // 0: q is one projection (q_proj), no q_b / q_norm
  int64_t kv_lora_rank = 0;
  int64_t nope_dim = 0, rope_dim = 0;  // dn, dr
  std::optional<Projection> q_b;  // [H*(dn + dr), q_lora_rank]
  std::optional<Tensor> q_norm;   // [q_lora_rank]
  Tensor kv_norm;                 // [kv_lora_rank]
  Projection kv_b;                // [H*(dn + dv), kv_lora_rank]
  double eps = 1e-6;
  int64_t latent_width() const { return kv_lora_rank + rope_dim; }  // one cached row
};

struct AttentionSpec {
  uint64_t uid = new_spec_uid();  // plan-cache identity; never edit a spec after running it
  std::string variant;  // for messages only
  OpSequence ops = OpSequence::Book;
  AttentionKernel attention = AttentionKernel::Ops;
  int64_t num_heads = 1;
  int64_t num_kv_heads = 1;  // == num_heads except for grouped-query attention
  int64_t head_dim = 1;      // dh: query/key width per head
  int64_t head_dim_v = 1;    // dv: value width per head
  Projection q, k, v;
  std::optional<Projection> out;  // absent: output is the concatenated context
  double scale = 1.0;
  bool causal = false;
  int64_t window = 0;  // sliding window size; 0 = unlimited
  std::optional<Tensor> bias_k, bias_v;  // [Hkv*dh] / [Hkv*dv], appended after projection
  bool add_zero_attn = false;
  std::optional<RotaryEmbedding> rope;  // needs self-attention shapes (S == L)
  std::optional<QkNorm> qk_norm;        // before rope; needs rope's shapes too
  // > 0: each score (after `scale`) becomes softcap * tanh(score / softcap)
  // before the mask (Gemma 2's attn_logit_softcapping).
  double softcap = 0.0;
  // [H] learned per-head logits that join each softmax row's denominator
  // and take no value (gpt-oss's sinks): weights = exp(s - m) / (sum exp(s - m)
  // + exp(sink - m)), with m the max over the row and the sink.
  std::optional<Tensor> sinks;
  double dropout = 0.0;  // applied to weights only when training
  // The fused [q | k | v] projection as the module holds it, when it does
  // (ttnn_mha_fused: weight [Eq+Ek+Ev, in], weight_in_out [in, Eq+Ek+Ev]);
  // q, k and v above are its row slices.
  std::optional<Projection> qkv_fused;
  // Multi-head latent attention: q is q_a_proj (or q_proj) and k and v are
  // both kv_a_proj_with_mqa; a backend without it refuses the spec.
  std::optional<Mla> mla;

  int64_t q_in() const { return q.weight.dim(1); }
  int64_t k_in() const { return k.weight.dim(1); }
  int64_t v_in() const { return v.weight.dim(1); }
  int64_t out_dim() const { return out ? out->weight.dim(0) : num_heads * head_dim_v; }
  int64_t extra_keys() const { return (bias_k ? 1 : 0) + (add_zero_attn ? 1 : 0); }
};

struct AttentionInputs {
  Tensor query, key, value;  // float32 (or float64) [B, L, q_in], [B, S, k_in], [B, S, v_in]
  // Additive float32 mask, broadcast over [B, H, L, S_total]: shape
  // [Bm, Hm, Lm, S_total] with Bm in {1, B}, Hm in {1, H} and Lm in {1, L}
  // (Lm = 1: one row for every query, as a key padding mask); -inf masks.
  std::optional<Tensor> mask;
  // Token positions for the rotary embedding, int64 [Bp, L] with Bp in
  // {1, B} (the keys share them: self-attention); absent: 0 .. L-1.
  std::optional<Tensor> positions;
  bool training = false;
  uint64_t dropout_seed = 0;
  // The module was called without a batch dim (torch_mha's 2-D query): the
  // variant added B = 1, and its finish() takes it off again. Backends ignore it.
  bool unbatched = false;
};

struct RunOptions {
  bool need_weights = false;      // return attention weights [B, H, L, S_total]
  bool collect_stages = false;    // fill AttentionResult::stages
  // One projection call per key/value group instead of one over all heads.
  // Head-parallel runs ask for it on every rank: a rank holds whole groups,
  // so it then makes exactly the calls a one-process run of the same config
  // makes for them, and the float32 backend's bits do not depend on how the
  // heads are split (parallel/head_parallel.h). Off by default, because the
  // extra calls cost the cpu backend about 12 % (docs/BENCHMARKS.md).
  bool group_projections = false;
};

struct AttentionResult {
  Tensor output;                  // [B, L, out_dim]
  std::optional<Tensor> weights;  // [B, H, L, S_total] when asked for
  // Intermediates, in pipeline order, when asked for: q, k, v [B, H, *, d],
  // scores, masked_scores, weights [B, H, L, S_total], context [B, L, H*dv],
  // output. A backend may add its own (tt-sim adds per-op stages).
  NamedTensors stages;
};

// Checks the spec's rope, qk_norm, softcap, sinks and mla fields (ranges and
// tensor shapes); throws InputError naming the field. validate_inputs and
// decode sessions call it.
void validate_spec_features(const AttentionSpec& spec);

// Checks that inputs fit the spec; throws InputError naming the input,
// the expected and the found shape.
void validate_inputs(const AttentionSpec& spec, const AttentionInputs& in);

// Multiply-add count of one forward pass (projections and attention;
// causal and windowed masks halve / shrink the attention part).
double attention_flops(const AttentionSpec& spec, const AttentionInputs& in);

}  // namespace mha
