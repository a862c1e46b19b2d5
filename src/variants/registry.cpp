#include "variants/registry.h"

namespace mha {

const std::vector<VariantEntry>& variant_registry() {
  static const std::vector<VariantEntry> table = {
      {"causal_attention", make_causal_attention}, {"mha_wrapper", make_mha_wrapper},
      {"mha_causal", make_mha_causal},             {"mha", make_aiedge_mha},
      {"mha_fused_qkv", make_aiedge_mha_fused_qkv}, {"ttnn_mha", make_ttnn_mha},
      {"ttnn_mha_fused", make_ttnn_mha_fused},     {"torch_mha", make_torch_mha},
  };
  return table;
}

}  // namespace mha
