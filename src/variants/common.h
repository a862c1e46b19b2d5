#pragma once
// Pieces shared by the variant files: parameter aliases, the self-attention
// input x, and linear-layer weight slots.
#include <initializer_list>
#include <string>
#include <vector>

#include "variants/variant.h"

namespace mha {

// Reads one integer/number/bool param that may be spelled several ways (the
// seeds disagree: d_in, dimension_inputs, dimensions_in); two spellings at
// once are an error. `names[0]` is used in messages.
int64_t param_int(const ordered_json& p, std::initializer_list<const char*> names, std::optional<int64_t> dflt,
                  int64_t min_value = 1);
double param_number(const ordered_json& p, std::initializer_list<const char*> names, std::optional<double> dflt);
bool param_bool(const ordered_json& p, std::initializer_list<const char*> names, std::optional<bool> dflt);
// Rejects params keys outside every alias list given.
void check_params(const ordered_json& p, std::initializer_list<std::initializer_list<const char*>> known);

// A float32 input tensor by name (InputError if absent and required).
const Tensor* find_input(const TensorMap& inputs, const std::string& name, bool required);
Tensor float_input(const Tensor& t, const std::string& name);

// Self-attention x [B, L, d_in] with L <= context_length (0: no limit).
AttentionInputs self_attention_inputs(const TensorMap& inputs, int64_t d_in, int64_t context_length);

// "P.weight" [out, in] and, with bias, "P.bias" [out]; aliases use alias_prefix.
void add_linear_slots(std::vector<WeightSlot>& slots, const std::string& prefix, int64_t in, int64_t out, bool bias,
                      const std::string& alias_prefix = "");
Projection linear_projection(const TensorMap& w, const std::string& prefix, bool bias);

void check_divisible(int64_t dim, const char* dim_name, int64_t heads, const char* heads_name);

}  // namespace mha
