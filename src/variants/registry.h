#pragma once
// The table of variants, one factory per seed module (internal to variants/).
#include <functional>
#include <vector>

#include "variants/variant.h"

namespace mha {

// What a generic driver (`mha bench`) needs to build a variant at a shape
// without knowing its spellings: causality, the params for (hidden, heads,
// seq), the forward options that pick causality, and the input names one
// self-attention tensor x fills.
struct VariantEntry {
  const char* name;
  std::function<std::unique_ptr<Variant>(const ordered_json& params)> make;
  Causality causality;
  std::function<ordered_json(const ShapeRequest& shape)> shape_params;
  std::vector<std::string> x_inputs = {"x"};
  std::function<ordered_json(bool causal)> causal_options = nullptr;  // Causality::Option only
  bool grouped_kv = false;  // shape_params honours ShapeRequest::kv_heads
};

const std::vector<VariantEntry>& variant_registry();

std::unique_ptr<Variant> make_causal_attention(const ordered_json& params);
std::unique_ptr<Variant> make_mha_wrapper(const ordered_json& params);
std::unique_ptr<Variant> make_mha_causal(const ordered_json& params);
std::unique_ptr<Variant> make_aiedge_mha(const ordered_json& params);
std::unique_ptr<Variant> make_aiedge_mha_fused_qkv(const ordered_json& params);
std::unique_ptr<Variant> make_ttnn_mha(const ordered_json& params);
std::unique_ptr<Variant> make_ttnn_mha_fused(const ordered_json& params);
std::unique_ptr<Variant> make_torch_mha(const ordered_json& params);
std::unique_ptr<Variant> make_llama_attention(const ordered_json& params);
std::unique_ptr<Variant> make_mla_attention(const ordered_json& params);

}  // namespace mha
