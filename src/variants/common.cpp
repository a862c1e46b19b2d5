#include "variants/common.h"

#include "util/error.h"
#include "util/text.h"
#include "tensor/tensor_ops.h"

namespace mha {

namespace {
const ordered_json* find_alias(const ordered_json& p, std::initializer_list<const char*> names, std::string& used) {
  const ordered_json* found = nullptr;
  for (const char* n : names) {
    const ordered_json* v = find(p, n);
    if (!v) continue;
    if (found) throw InputError("params." + std::string(n) + ": duplicates params." + used + " (same argument)");
    found = v;
    used = n;
  }
  return found;
}
}  // namespace

int64_t param_int(const ordered_json& p, std::initializer_list<const char*> names, std::optional<int64_t> dflt,
                  int64_t min_value) {
  std::string used;
  const ordered_json* v = find_alias(p, names, used);
  if (!v) {
    if (!dflt) throw InputError("params." + std::string(*names.begin()) + ": required parameter is missing");
    return *dflt;
  }
  return as_int(*v, "params." + used, min_value);
}

double param_number(const ordered_json& p, std::initializer_list<const char*> names, std::optional<double> dflt) {
  std::string used;
  const ordered_json* v = find_alias(p, names, used);
  if (!v) {
    if (!dflt) throw InputError("params." + std::string(*names.begin()) + ": required parameter is missing");
    return *dflt;
  }
  return as_number(*v, "params." + used);
}

bool param_bool(const ordered_json& p, std::initializer_list<const char*> names, std::optional<bool> dflt) {
  std::string used;
  const ordered_json* v = find_alias(p, names, used);
  if (!v) {
    if (!dflt) throw InputError("params." + std::string(*names.begin()) + ": required parameter is missing");
    return *dflt;
  }
  return as_bool(*v, "params." + used);
}

void check_params(const ordered_json& p, std::initializer_list<std::initializer_list<const char*>> known) {
  for (auto it = p.begin(); it != p.end(); ++it) {
    bool ok = false;
    std::string list;
    for (const auto& names : known)
      for (const char* n : names) {
        ok = ok || it.key() == n;
        list += (list.empty() ? "" : ", ") + std::string(n);
      }
    if (!ok) throw InputError("params." + printable(it.key()) + ": unknown parameter (expected: " + list + ")");
  }
}

const Tensor* find_input(const TensorMap& inputs, const std::string& name, bool required) {
  auto it = inputs.find(name);
  if (it == inputs.end()) {
    if (required) throw InputError("inputs." + name + ": required input is missing");
    return nullptr;
  }
  return &it->second;
}

Tensor float_input(const Tensor& t, const std::string& name) {
  if (!dtype_is_float(t.dtype()))
    throw InputError("inputs." + name + ": expected a floating-point tensor, found " + dtype_name(t.dtype()));
  return as_working_float(t);  // float64 stays float64 for the reference backend
}

AttentionInputs self_attention_inputs(const TensorMap& inputs, int64_t d_in, int64_t context_length) {
  Tensor x = float_input(*find_input(inputs, "x", true), "x");
  if (x.ndim() != 3 || x.dim(2) != d_in)
    throw InputError("inputs.x: expected shape (batch, tokens, " + std::to_string(d_in) + "), found " +
                     shape_str(x.shape()));
  if (context_length > 0 && x.dim(1) > context_length)
    throw InputError("inputs.x: sequence of " + std::to_string(x.dim(1)) + " tokens is longer than params.context_length " +
                     std::to_string(context_length));
  AttentionInputs in;
  in.query = x;
  in.key = x;
  in.value = x;
  return in;
}

void add_linear_slots(std::vector<WeightSlot>& slots, const std::string& prefix, int64_t in, int64_t out, bool bias,
                      const std::string& alias_prefix) {
  auto aliases = [&](const char* leaf) {
    return alias_prefix.empty() ? std::vector<std::string>{} : std::vector<std::string>{alias_prefix + leaf};
  };
  slots.push_back({prefix + ".weight", {out, in}, aliases(".weight")});
  if (bias) slots.push_back({prefix + ".bias", {out}, aliases(".bias")});
}

Projection linear_projection(const TensorMap& w, const std::string& prefix, bool bias) {
  Projection p;
  p.weight = w.at(prefix + ".weight");
  if (bias) p.bias = w.at(prefix + ".bias");
  return p;
}

void check_divisible(int64_t dim, const char* dim_name, int64_t heads, const char* heads_name) {
  if (dim % heads != 0)
    throw InputError(std::string("params.") + dim_name + ": expected a multiple of params." + heads_name + " (" +
                     std::to_string(heads) + "), found " + std::to_string(dim));
}

}  // namespace mha
