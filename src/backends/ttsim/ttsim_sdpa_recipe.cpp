#include <cstring>

#include "backends/ttsim/ttsim_sdpa.h"

#include "backends/ttsim/ops/rms_norm/rms_norm.h"
#include "ttsim/formats.h"

namespace mha::ttsim {

namespace {

// tt_transformers' compute_kernel_config_hifi2 / _hifi4.
ComputeConfig kernel_config(MathFidelity f, bool approx, const TtOptions& o) {
  ComputeConfig c;
  c.math_fidelity = o.math_fidelity.value_or(f);
  c.math_approx_mode = o.math_approx_mode.value_or(approx);
  c.fp32_dest_acc_en = o.fp32_dest_acc_en.value_or(true);
  c.bfp8_pack_precise = o.bfp8_pack_precise.value_or(false);
  c.numerics = o.numerics;
  apply_device(c, o);
  return c;
}

// Row r of a per-head [heads * head_dim] layout in Meta's interleaved order
// (convert_hf_to_meta's permutation): within each head, column i < half ->
// 2i, column half + i -> 2i + 1; itself without `meta`.
int64_t meta_index(int64_t r, int64_t head_dim, bool meta) {
  if (!meta) return r;
  const int64_t h = r / head_dim, i = r % head_dim, half = head_dim / 2;
  return h * head_dim + (i < half ? 2 * i : 2 * (i - half) + 1);
}

// (out, in) weight rows -> (in, out) columns [c0, c0 + out) of `cat` (width
// `width`), each head's columns in Meta order with `meta`.
void place_transposed(const Tensor& w, std::vector<float>& cat, int64_t width, int64_t c0, int64_t head_dim, bool meta) {
  const int64_t out = w.dim(0), in = w.dim(1);
  const float* p = w.data<float>();
  for (int64_t r = 0; r < out; ++r) {
    const int64_t col = meta_index(r, head_dim, meta);
    for (int64_t c = 0; c < in; ++c) cat[c * width + c0 + col] = p[r * in + c];
  }
}
void place_bias(const std::optional<Tensor>& b, std::vector<float>& row, int64_t c0, int64_t n, int64_t head_dim,
                bool meta) {
  if (!b) return;
  const float* p = b->data<float>();
  for (int64_t r = 0; r < n; ++r) row[c0 + meta_index(r, head_dim, meta)] = p[r];
}

// The spec's QK-norm weights and sinks as TT-NN's model code holds them
// (SdpaWeights).
void convert_norms_and_sinks(const AttentionSpec& spec, SdpaWeights& w) {
  if (spec.qk_norm) {
    const int64_t dh = spec.head_dim;
    for (auto [src, dst] : {std::pair{&spec.qk_norm->q_weight, &w.q_norm}, {&spec.qk_norm->k_weight, &w.k_norm}}) {
      std::vector<float> g(static_cast<size_t>(dh));
      for (int64_t i = 0; i < dh; ++i) g[meta_index(i, dh, spec.rope.has_value())] = src->data<float>()[i];
      *dst = rms_norm_weight_bf16(g.data(), dh, spec.qk_norm->offset_one);
    }
  }
  if (spec.sinks) {
    // Both SDPA programs take the sink in the units of the unscaled scores
    // and multiply it by the scale inside the exp, where transformers' sink
    // is already a logit. So TT-NN's gpt-oss weights.py stores sinks /
    // config.scaling (a float32 division, held as bfloat16) for prefill's
    // attention_sink and for decode's decode_sinks alike (docs/TTSIM.md
    // "gpt-oss").
    const float* s = spec.sinks->data<float>();
    const float scale = static_cast<float>(spec.scale);
    for (int64_t h = 0; h < spec.num_heads; ++h) w.sinks.push_back(host_round_bf16(s[h] / scale));
  }
}

}  // namespace

SdpaRecipe make_sdpa_recipe(const TtOptions& o) {
  SdpaRecipe r;
  r.weights = o.dtype.value_or(DataFormat::Bfp8_b);
  r.cache = o.kv_cache_dtype.value_or(DataFormat::Bfp8_b);
  r.qkv = r.wo = r.sdpa_decode = kernel_config(MathFidelity::HiFi2, true, o);
  r.sdpa_prefill = kernel_config(MathFidelity::HiFi4, false, o);
  // rotary_embedding_llama gets no compute_kernel_config from the model: the
  // device default (HiFi4, approx off, 16-bit Dst).
  r.rotary = kernel_config(MathFidelity::HiFi4, false, o);
  r.rotary.fp32_dest_acc_en = o.fp32_dest_acc_en.value_or(false);
  r.qk_norm = kernel_config(MathFidelity::HiFi2, false, o);
  r.qkv.output = r.act;
  r.wo.output = r.out_prefill;
  r.sdpa_prefill.output = r.q_sdpa;
  r.sdpa_decode.output = r.act;
  r.rotary.output = r.act;
  r.qk_norm.output = r.act;
  r.grid = o.core_grid.value_or(Grid{});
  return r;
}

nlohmann::json sdpa_recipe_json(const SdpaRecipe& r) {
  auto cfg = [](const ComputeConfig& c) {
    return nlohmann::json{{"math_fidelity", fidelity_name(c.math_fidelity)},
                          {"math_approx_mode", c.math_approx_mode},
                          {"fp32_dest_acc_en", c.fp32_dest_acc_en}};
  };
  return {{"pipeline", "sdpa"},
          {"activation_dtype", format_name(r.act)},
          {"weight_dtype", format_name(r.weights)},
          {"kv_cache_dtype", format_name(r.cache)},
          {"sdpa_q_dtype", format_name(r.q_sdpa)},
          {"li_qkv", cfg(r.qkv)},
          {"li_o", cfg(r.wo)},
          {"sdpa_prefill", cfg(r.sdpa_prefill)},
          {"sdpa_decode", cfg(r.sdpa_decode)},
          {"rotary", cfg(r.rotary)},
          {"qk_norm", cfg(r.qk_norm)},
          {"exp_approx_mode_prefill", r.exp_approx_prefill},
          {"core_grid", {r.grid.y, r.grid.x}}};
}

std::vector<const TileTensor*> SdpaWeights::all() const {
  std::vector<const TileTensor*> v{&wqkv, &wo};
  for (const auto* t : {&bqkv, &bo})
    if (*t) v.push_back(&**t);
  return v;
}

SdpaWeights convert_sdpa_weights(const AttentionSpec& spec, const SdpaRecipe& r) {
  const int64_t in = spec.q_in(), dh = spec.head_dim;
  const int64_t nq = spec.num_heads * dh, nk = spec.num_kv_heads * dh, nv = spec.num_kv_heads * spec.head_dim_v;
  const int64_t width = nq + nk + nv;
  const bool meta = spec.rope.has_value();
  std::vector<float> cat(static_cast<size_t>(in * width)), bias(static_cast<size_t>(width), 0.0f);
  place_transposed(spec.q.weight, cat, width, 0, dh, meta);
  place_transposed(spec.k.weight, cat, width, nq, dh, meta);
  place_transposed(spec.v.weight, cat, width, nq + nk, spec.head_dim_v, false);
  place_bias(spec.q.bias, bias, 0, nq, dh, meta);
  place_bias(spec.k.bias, bias, nq, nk, dh, meta);
  place_bias(spec.v.bias, bias, nq + nk, nv, spec.head_dim_v, false);
  SdpaWeights w;
  w.wqkv = to_tile_layout(cat.data(), {in, width}, r.weights);
  if (spec.q.bias || spec.k.bias || spec.v.bias) w.bqkv = to_tile_layout(bias.data(), {1, width}, r.weights);
  const int64_t e_out = spec.out_dim(), ctx = spec.num_heads * spec.head_dim_v;
  if (spec.out) {
    std::vector<float> wo(static_cast<size_t>(ctx * e_out));
    place_transposed(spec.out->weight, wo, e_out, 0, 1, false);
    w.wo = to_tile_layout(wo.data(), {ctx, e_out}, r.weights);
    if (spec.out->bias) w.bo = to_tile_layout(spec.out->bias->data<float>(), {1, e_out}, r.weights);
  }
  convert_norms_and_sinks(spec, w);
  return w;
}

std::optional<std::string> sdpa_unsupported(const AttentionSpec& spec, const AttentionInputs* in) {
  const std::string pre = "the SDPA pipeline ";
  if (!spec.causal) return pre + "runs causal attention only (TT-NN's is_causal=True); the spec is not causal";
  if (spec.extra_keys() > 0) return pre + "has no extra key rows (bias_k / add_zero_attn)";
  if (spec.head_dim != spec.head_dim_v)
    return pre + "needs one head width for q, k and v (found " + std::to_string(spec.head_dim) + " and " +
           std::to_string(spec.head_dim_v) + ")";
  if (spec.head_dim % 32 != 0)
    return pre + "needs a head_dim that is a multiple of 32 (nlp_create_qkv_heads moves whole tiles), found " +
           std::to_string(spec.head_dim);
  if (spec.q_in() != spec.k_in() || spec.q_in() != spec.v_in())
    return pre + "projects one input through a fused QKV weight: q, k and v need one input width";
  if (!in) return std::nullopt;
  if (in->training && spec.dropout > 0.0) return pre + "has no dropout (training mode)";
  if (in->mask) return pre + "takes no additive mask (attn_mask / key_padding_mask / attention_mask)";
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() &&
           (a.raw() == b.raw() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
  };
  if (!same(in->query, in->key) || !same(in->query, in->value))
    return pre + "is self-attention: query, key and value must be the same tensor";
  return std::nullopt;
}

}  // namespace mha::ttsim
