#include "variants/variant.h"

#include <set>

#include "util/checked_size.h"
#include "util/error.h"
#include "util/text.h"
#include "variants/registry.h"
#include "tensor/tensor_ops.h"

namespace mha {

NamedTensors Variant::init_rand(uint64_t) const {
  throw InputError("weights.init: \"rand\" is only defined for the ttnn variants (seed 002); variant '" + name() +
                   "' takes \"torch\"");
}

ForwardOptions Variant::parse_options(const ordered_json& options) const {
  check_keys(options, "options", {"need_weights", "training"});
  ForwardOptions o;
  o.need_weights = get_bool(options, "need_weights", "options", false);
  o.training = get_bool(options, "training", "options", false);
  return o;
}

AttentionInputs Variant::build_inputs(const TensorMap& inputs, const ForwardOptions& opt) const {
  const std::vector<InputSlot> slots = input_slots();
  std::string names;
  for (const InputSlot& s : slots) names += (names.empty() ? "" : ", ") + s.name;
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const InputSlot& s : slots) known = known || s.name == name;
    if (!known) throw InputError("inputs." + printable(name) + ": unknown input (expected " + names + ")");
  }
  for (const InputSlot& s : slots)
    if (s.required && !inputs.count(s.name)) throw InputError("inputs." + s.name + ": required input is missing");
  return map_inputs(inputs, opt);
}

AttentionResult Variant::finish(AttentionResult r, const ForwardOptions&, const AttentionInputs&) const { return r; }

TensorMap bind_weights(const Variant& v, const NamedTensors& loaded, const std::string& source) {
  TensorMap out;
  std::set<std::string> used;
  for (const WeightSlot& slot : v.weight_slots()) {
    const Tensor* found = nullptr;
    std::string found_name;
    for (const auto& [name, t] : loaded) {
      bool match = name == slot.name;
      for (const std::string& a : slot.aliases) match = match || name == a;
      if (!match) continue;
      if (found)
        throw InputError(source + ": tensors '" + printable(found_name) + "' and '" + printable(name) + "' both give weight '" + slot.name + "'");
      found = &t;
      found_name = name;
    }
    if (!found && slot.buffer) continue;
    if (!found) {
      std::string also;
      for (const std::string& a : slot.aliases) also += " or '" + a + "'";
      throw InputError(source + ": missing tensor '" + slot.name + "'" + also + " of shape " + shape_str(slot.shape) +
                       " for variant " + v.name());
    }
    if (found->shape() != slot.shape)
      throw InputError(source + ": tensor '" + printable(found_name) + "': expected shape " + shape_str(slot.shape) + ", found " +
                       shape_str(found->shape()));
    if (!dtype_is_float(found->dtype()))
      throw InputError(source + ": tensor '" + printable(found_name) + "': expected a floating-point dtype, found " +
                       dtype_name(found->dtype()));
    used.insert(found_name);
    if (!slot.buffer) out[slot.name] = as_working_float(*found);  // float64 stays float64
  }
  for (const auto& [name, t] : loaded)
    if (!used.count(name))
      throw InputError(source + ": unexpected tensor '" + printable(name) + "' of shape " + shape_str(t.shape()) +
                       " (not a state_dict entry of variant " + v.name() + ")");
  return out;
}

namespace {
// Every weight slot, held as float32 (float64 on the reference backend, hence
// 8 bytes here): refused when a shape's product overflows or the total exceeds
// the machine's physical memory, before anything is drawn or read. The
// variants check the products of their params (heads x head_dim) as they
// parse them, so the slots' dimensions themselves are exact.
void check_weight_sizes(const Variant& v) {
  int64_t total = 0;
  std::string largest;
  int64_t largest_n = -1;
  for (const WeightSlot& slot : v.weight_slots()) {
    const std::string what = "params of variant " + v.name() + ": weight '" + slot.name + "' of shape " + shape_str(slot.shape);
    int64_t n = 1;
    for (int64_t d : slot.shape) n = checked_mul(n, d, what);
    if (slot.buffer) continue;  // never held (seed 003's [context_length, context_length] mask): its product only
    total = checked_add(total, n, "params of variant " + v.name() + ": the weights' total size");
    if (n > largest_n) largest_n = n, largest = "'" + slot.name + "' " + shape_str(slot.shape);
  }
  check_bytes(total, 8, "params of variant " + v.name() + ": the weights (largest " + largest + ")");
}
}  // namespace

std::unique_ptr<Variant> make_variant(const std::string& name, const ordered_json& params) {
  require_object(params, "params");
  for (const VariantEntry& e : variant_registry())
    if (name == e.name) {
      std::unique_ptr<Variant> v = e.make(params);
      check_weight_sizes(*v);
      return v;
    }
  std::string list;
  for (const std::string& n : variant_names()) list += (list.empty() ? "" : ", ") + n;
  throw InputError("variant: unknown variant '" + printable(name) + "' (expected one of: " + list + ")");
}

ShapeRecipe recipe_for_shape(const std::string& variant, const ShapeRequest& shape) {
  for (const VariantEntry& e : variant_registry()) {
    if (variant != e.name) continue;
    ShapeRecipe r;
    if (e.causality == Causality::Always && !shape.causal) r.why_not = variant + " is always causal";
    if (e.causality == Causality::Never && shape.causal) r.why_not = variant + " has no causal mask";
    if (!e.grouped_kv && shape.kv_heads > 0 && shape.kv_heads != shape.heads)
      r.why_not = variant + " has no grouped kv heads";
    if (!r.why_not.empty()) return r;
    r.params = e.shape_params(shape);
    if (e.causal_options) r.options = e.causal_options(shape.causal);
    r.x_inputs = e.x_inputs;
    return r;
  }
  throw InputError("variant: unknown variant '" + printable(variant) + "'");
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const VariantEntry& e : variant_registry()) names.push_back(e.name);
  return names;
}

}  // namespace mha
