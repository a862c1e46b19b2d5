#include "run/checkpoint_weights.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace {

bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }

std::size_t common_prefix(const std::string& a, const std::string& b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// "'a', 'b', 'c' and 7 more" from the first `k` names.
std::string some_names(const std::vector<std::string>& names, std::size_t k = 3) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < k; ++i) s += (i ? ", '" : "'") + printable(names[i], 120) + "'";
  if (names.size() > k) s += " and " + std::to_string(names.size() - k) + " more";
  return s;
}

// The names sharing the longest start with `prefix`: what the user most
// likely meant ("model.layers.0.attn.q_proj.weight" for "model.layers.0.self_attn.").
std::vector<std::string> closest_names(const std::vector<std::string>& names, const std::string& prefix) {
  std::vector<std::string> sorted = names;
  std::stable_sort(sorted.begin(), sorted.end(), [&](const std::string& a, const std::string& b) {
    return common_prefix(a, prefix) > common_prefix(b, prefix);
  });
  return sorted;
}

// The names a slot accepts: its own, then its aliases.
std::vector<std::string> accepted_names(const WeightSlot& slot) {
  std::vector<std::string> names = slot.aliases;
  names.insert(names.begin(), slot.name);
  return names;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A whole model given where one layer is expected (a weight missing, but
// names ending in ".WEIGHT" present): say so, with the prefix to use, before
// reading it all.
void hint_prefix_for_whole_model(const Variant& v, const io::Checkpoint& ck) {
  for (const WeightSlot& slot : v.weight_slots()) {
    const std::vector<std::string> accepted = accepted_names(slot);
    if (slot.buffer || std::any_of(accepted.begin(), accepted.end(), [&](const std::string& a) { return contains(ck.names(), a); }))
      continue;
    const std::string tail = "." + slot.name;
    std::vector<std::string> layers;
    for (const std::string& name : ck.names())
      if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) layers.push_back(name);
    if (!layers.empty())
      throw InputError(printable(ck.source(), 400) + ": no tensor '" + slot.name + "' of variant " + v.name() + ", but " +
                       std::to_string(layers.size()) + " end with it (" + some_names(layers, 2) +
                       "): pick one layer with weights.prefix, e.g. \"" +
                       printable(layers[0].substr(0, layers[0].size() - slot.name.size()), 120) + "\"");
  }
}

}  // namespace

TensorMap load_checkpoint_weights(const Variant& v, const std::string& path, const std::optional<std::string>& prefix) {
  const io::Checkpoint ck(path);
  if (!prefix) {
    hint_prefix_for_whole_model(v, ck);
    return bind_weights(v, ck.read(ck.names()), ck.source());
  }

  const std::string& p = *prefix;
  const std::string where = printable(ck.source(), 400) + ": weights.prefix '" + printable(p, 120) + "'";
  std::vector<std::string> under;  // names under the prefix, stripped
  for (const std::string& name : ck.names())
    if (starts_with(name, p)) under.push_back(name.substr(p.size()));
  if (under.empty())
    throw InputError(where + " matches none of its " + std::to_string(ck.names().size()) +
                     " tensors (closest: " + some_names(closest_names(ck.names(), p)) + ")");

  std::vector<std::string> wanted;  // full names, in slot order
  for (const WeightSlot& slot : v.weight_slots()) {
    bool found = false;
    for (const std::string& a : accepted_names(slot))
      if (contains(under, a)) {
        wanted.push_back(p + a);
        found = true;
      }
    if (!found && !slot.buffer)
      throw InputError(where + " leaves weight '" + slot.name + "' of shape " + shape_str(slot.shape) + " of variant " +
                       v.name() + " missing (expected '" + printable(p, 120) + slot.name + "'; found with that prefix: " +
                       some_names(under, 4) + ")");
  }
  spdlog::debug("{}: reading {} of the {} tensors under '{}'", ck.source(), wanted.size(), under.size(), p);
  NamedTensors loaded = ck.read(wanted);
  for (auto& nt : loaded) nt.first = nt.first.substr(p.size());
  return bind_weights(v, loaded, printable(ck.source(), 400) + " (prefix '" + printable(p, 120) + "')");
}

}  // namespace mha
