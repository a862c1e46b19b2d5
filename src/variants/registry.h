#pragma once
// The table of variants, one factory per seed module (internal to variants/).
#include <functional>
#include <vector>

#include "variants/variant.h"

namespace mha {

struct VariantEntry {
  const char* name;
  std::function<std::unique_ptr<Variant>(const ordered_json& params)> make;
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

}  // namespace mha
