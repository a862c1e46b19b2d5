#include "run/checkpoint_weights.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

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

// The `k` names sharing the longest start with `prefix`: what the user most
// likely meant ("model.layers.0.attn.q_proj.weight" for
// "model.layers.0.self_attn."). One pass, however many names.
std::vector<std::string> closest_names(const std::vector<std::string>& names, const std::string& prefix, std::size_t k = 3) {
  std::vector<std::pair<std::size_t, std::size_t>> best;  // (common length, position), longest first
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t c = common_prefix(names[i], prefix);
    if (best.size() == k && c <= best.back().first) continue;
    auto at = std::find_if(best.begin(), best.end(), [&](const auto& b) { return c > b.first; });
    best.insert(at, {c, i});
    if (best.size() > k) best.pop_back();
  }
  std::vector<std::string> out;
  for (const auto& b : best) out.push_back(names[b.second]);
  return out;
}

// The names a slot accepts: its own, then its aliases.
std::vector<std::string> accepted_names(const WeightSlot& slot) {
  std::vector<std::string> names = slot.aliases;
  names.insert(names.begin(), slot.name);
  return names;
}

// Every dtype and shape checked against the slots from the headers alone,
// before any tensor's data is read (a 2 GiB tensor of the wrong shape is
// refused in microseconds); bind_weights checks the same again on the data.
// `wanted` are full names; `strip` characters of prefix precede the slot name.
void check_headers(const Variant& v, const io::Checkpoint& ck, const std::vector<std::string>& wanted, std::size_t strip,
                   const std::string& source) {
  std::unordered_map<std::string, const WeightSlot*> slot_of;
  const std::vector<WeightSlot> slots = v.weight_slots();
  for (const WeightSlot& slot : slots)
    for (const std::string& a : accepted_names(slot)) slot_of.emplace(a, &slot);
  for (const std::string& full : wanted) {
    const io::TensorInfo info = ck.info(full);
    const std::string name = full.substr(strip);
    auto it = slot_of.find(name);
    if (it == slot_of.end())
      throw InputError(source + ": unexpected tensor '" + printable(name) + "' of shape " + shape_str(info.shape) +
                       " (not a state_dict entry of variant " + v.name() + ")");
    if (info.shape != it->second->shape)
      throw InputError(source + ": tensor '" + printable(name) + "': expected shape " + shape_str(it->second->shape) +
                       ", found " + shape_str(info.shape));
    if (!dtype_is_float(info.dtype))
      throw InputError(source + ": tensor '" + printable(name) + "': expected a floating-point dtype, found " +
                       dtype_name(info.dtype));
  }
}

// A whole model given where one layer is expected (a weight missing, but
// names ending in ".WEIGHT" present): say so, with the prefix to use, before
// reading it all.
void hint_prefix_for_whole_model(const Variant& v, const io::Checkpoint& ck) {
  for (const WeightSlot& slot : v.weight_slots()) {
    const std::vector<std::string> accepted = accepted_names(slot);
    if (slot.buffer || std::any_of(accepted.begin(), accepted.end(), [&](const std::string& a) { return ck.has(a); }))
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

// bfloat16 / float16 (or any float) weights holding NaN or Inf would run to
// a NaN output without a word: refused, naming the first such value.
TensorMap finite_weights(TensorMap w, const std::string& source) {
  for (const auto& entry : w) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    auto scan = [&](const auto* v) {
      for (int64_t i = 0; i < t.numel(); ++i)
        if (!std::isfinite(v[i]))
          throw InputError(source + ": weight '" + name + "' holds " + (std::isnan(v[i]) ? "NaN" : "Inf") +
                           " at flat index " + std::to_string(i) + " (weights must be finite)");
    };
    if (t.dtype() == DType::F64) scan(t.data<double>());
    else if (t.dtype() == DType::F32) scan(t.data<float>());
  }
  return w;
}

}  // namespace

TensorMap load_checkpoint_weights(const Variant& v, const std::string& path, const std::optional<std::string>& prefix) {
  const io::Checkpoint ck(path);
  if (!prefix) {
    hint_prefix_for_whole_model(v, ck);
    // Every name must be a weight: checked on the names and headers (one
    // hashed pass) before anything is read.
    check_headers(v, ck, ck.names(), 0, printable(ck.source(), 400));
    return finite_weights(bind_weights(v, ck.read(ck.names()), printable(ck.source(), 400)), printable(ck.source(), 400));
  }

  const std::string& p = *prefix;
  const std::string where = printable(ck.source(), 400) + ": weights.prefix '" + printable(p, 120) + "'";
  std::vector<std::string> under;  // names under the prefix, stripped
  for (const std::string& name : ck.names())
    if (starts_with(name, p)) under.push_back(name.substr(p.size()));
  const std::unordered_set<std::string_view> under_set(under.begin(), under.end());
  if (under.empty())
    throw InputError(where + " matches none of its " + std::to_string(ck.names().size()) +
                     " tensors (closest: " + some_names(closest_names(ck.names(), p)) +
                     (ck.names().size() > 3 ? " and " + std::to_string(ck.names().size() - 3) + " more" : "") + ")");

  std::vector<std::string> wanted;  // full names, in slot order
  for (const WeightSlot& slot : v.weight_slots()) {
    bool found = false;
    for (const std::string& a : accepted_names(slot))
      if (under_set.count(a)) {
        wanted.push_back(p + a);
        found = true;
      }
    if (!found && !slot.buffer)
      throw InputError(where + " leaves weight '" + slot.name + "' of shape " + shape_str(slot.shape) + " of variant " +
                       v.name() + " missing (expected '" + printable(p, 120) + slot.name + "'; found with that prefix: " +
                       some_names(under, 4) + ")");
  }
  spdlog::debug("{}: reading {} of the {} tensors under '{}'", ck.source(), wanted.size(), under.size(), p);
  const std::string source = printable(ck.source(), 400) + " (prefix '" + printable(p, 120) + "')";
  check_headers(v, ck, wanted, p.size(), source);
  NamedTensors loaded = ck.read(wanted);
  for (auto& nt : loaded) nt.first = nt.first.substr(p.size());
  return finite_weights(bind_weights(v, loaded, source), source);
}

}  // namespace mha
