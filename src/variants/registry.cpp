#include "variants/registry.h"

namespace mha {

namespace {

// Seeds 000 / 003: d_out = hidden (per head for the wrapper), context = seq.
ordered_json book(const ShapeRequest& r, bool heads, int64_t d_out) {
  ordered_json p = {{"d_in", r.hidden}, {"d_out", d_out}, {"context_length", r.seq}, {"dropout", 0.0}};
  if (heads) p["num_heads"] = r.heads;
  return p;
}

}  // namespace

const std::vector<VariantEntry>& variant_registry() {
  using C = Causality;
  static const std::vector<VariantEntry> table = {
      {"causal_attention", make_causal_attention, C::Always,
       [](const ShapeRequest& r) { return book(r, false, r.hidden); }},
      {"mha_wrapper", make_mha_wrapper, C::Always, [](const ShapeRequest& r) { return book(r, true, r.hidden / r.heads); }},
      {"mha_causal", make_mha_causal, C::Always, [](const ShapeRequest& r) { return book(r, true, r.hidden); }},
      {"mha", make_aiedge_mha, C::Never,
       [](const ShapeRequest& r) { return ordered_json{{"d_model", r.hidden}, {"n_head", r.heads}}; }},
      {"mha_fused_qkv", make_aiedge_mha_fused_qkv, C::Never,
       [](const ShapeRequest& r) { return ordered_json{{"d_model", r.hidden}, {"n_head", r.heads}}; }},
      {"ttnn_mha", make_ttnn_mha, C::Never,
       [](const ShapeRequest& r) { return ordered_json{{"hidden_size", r.hidden}, {"num_heads", r.heads}}; }},
      {"ttnn_mha_fused", make_ttnn_mha_fused, C::Never,
       [](const ShapeRequest& r) { return ordered_json{{"hidden_size", r.hidden}, {"num_heads", r.heads}}; }},
      {"torch_mha", make_torch_mha, C::Option,
       [](const ShapeRequest& r) {
         return ordered_json{{"embed_dim", r.hidden}, {"num_heads", r.heads}, {"batch_first", true}};
       },
       {"query", "key", "value"},
       [](bool causal) { return ordered_json{{"need_weights", false}, {"is_causal", causal}}; }},
      {"llama_attention", make_llama_attention, C::Always,
       [](const ShapeRequest& r) {
         return ordered_json{{"hidden_size", r.hidden},
                             {"num_attention_heads", r.heads},
                             {"num_key_value_heads", r.kv_heads > 0 ? r.kv_heads : r.heads},
                             {"max_position_embeddings", r.seq}};
       },
       {"x"}, nullptr, true},
      // DeepSeek-V3's latent widths (its config's defaults) at any hidden / heads.
      {"mla_attention", make_mla_attention, C::Always,
       [](const ShapeRequest& r) {
         return ordered_json{{"hidden_size", r.hidden}, {"num_attention_heads", r.heads},
                             {"max_position_embeddings", r.seq}};
       }},
  };
  return table;
}

}  // namespace mha
