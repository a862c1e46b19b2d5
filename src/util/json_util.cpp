#include "util/json_util.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/json_depth.h"
#include "util/read_file.h"
#include "util/text.h"

namespace mha {

ordered_json read_json_file(const std::string& path, const char* what) {
  return parse_json_text(read_input_file(path), printable(path, 400), what);
}

ordered_json parse_json_text(std::string_view text, const std::string& where, const char* what) {
  std::size_t deep = json_too_deep_at(text);
  if (deep != std::string::npos)
    throw InputError(where + ": " + what + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                     " levels at byte " + std::to_string(deep));
  try {
    return ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number such as 1e400
    // that does not fit in a double.
    throw InputError(where + ": invalid JSON: " + printable(e.what(), 200));
  }
}

namespace {

// Appends a short rendering of v to out, stopping once out passes `budget`
// characters; containers are shown at most two levels deep, so this never
// walks (or recurses into) a large or deep value.
void brief(const ordered_json& v, std::string& out, std::size_t budget, int depth) {
  if (out.size() > budget) return;
  switch (v.type()) {
    case ordered_json::value_t::string:
      out += "\"" + printable(v.get_ref<const std::string&>(), budget) + "\"";
      return;
    case ordered_json::value_t::array:
    case ordered_json::value_t::object: {
      const bool obj = v.is_object();
      out += obj ? '{' : '[';
      if (depth >= 2 && !v.empty()) {
        out += "...";
      } else {
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
          if (out.size() > budget) { out += ", ..."; break; }
          if (!first) out += ", ";
          first = false;
          if (obj) out += "\"" + printable(it.key(), budget) + "\": ";
          brief(*it, out, budget, depth + 1);
        }
      }
      out += obj ? '}' : ']';
      return;
    }
    default:
      out += v.dump();  // a number, true, false or null: short
  }
}

}  // namespace

std::string json_brief(const ordered_json& v) {
  std::string s;
  brief(v, s, 40, 0);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

int json_depth(const ordered_json& v) {
  // Iterative, so a value nested 100,000 deep built in code is measured
  // without recursion.
  int deepest = 0;
  std::vector<std::pair<const ordered_json*, int>> stack{{&v, 1}};
  while (!stack.empty()) {
    auto [p, d] = stack.back();
    stack.pop_back();
    if (!p->is_structured()) continue;
    deepest = std::max(deepest, d);
    for (const auto& child : *p) stack.emplace_back(&child, d + 1);
  }
  return deepest;
}

static std::string kind(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::null: return "null";
    case ordered_json::value_t::object: return "an object";
    case ordered_json::value_t::array: return "an array";
    case ordered_json::value_t::string: return "the string " + json_brief(v);
    case ordered_json::value_t::boolean: return json_brief(v);
    default: return json_brief(v);
  }
}

[[noreturn]] static void fail(const std::string& path, const std::string& expected, const ordered_json& v) {
  throw InputError(path + ": expected " + expected + ", found " + kind(v));
}

void check_keys(const ordered_json& obj, const std::string& path, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw InputError(path + "." + printable(it.key()) + ": unknown key (expected one of: " + list + ")");
    }
  }
}

const ordered_json& require_object(const ordered_json& v, const std::string& path) {
  if (!v.is_object()) fail(path, "an object", v);
  return v;
}

const ordered_json* find(const ordered_json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

int64_t as_int(const ordered_json& v, const std::string& path, int64_t min_value) {
  std::string what = min_value == 1 ? "a positive integer" : min_value == 0 ? "a non-negative integer" : "an integer";
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail(path, what, v);
    int64_t x = static_cast<int64_t>(v.get<uint64_t>());
    if (x < min_value) fail(path, what, v);
    return x;
  }
  if (!v.is_number_integer()) fail(path, what, v);
  int64_t x = v.get<int64_t>();
  if (x < min_value) fail(path, what, v);
  return x;
}

double as_number(const ordered_json& v, const std::string& path) {
  if (!v.is_number()) fail(path, "a number", v);
  return v.get<double>();
}

bool as_bool(const ordered_json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path, "true or false", v);
  return v.get<bool>();
}

std::string as_string(const ordered_json& v, const std::string& path) {
  if (!v.is_string()) fail(path, "a string", v);
  return v.get<std::string>();
}

uint64_t as_seed(const ordered_json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());  // torch wraps negatives too
  fail(path, "an integer seed", v);
}

int64_t get_int(const ordered_json& obj, const char* key, const std::string& path, std::optional<int64_t> dflt,
                int64_t min_value) {
  const ordered_json* v = find(obj, key);
  if (!v) {
    if (!dflt) throw InputError(path + "." + key + ": required key is missing");
    return *dflt;
  }
  return as_int(*v, path + "." + key, min_value);
}

bool get_bool(const ordered_json& obj, const char* key, const std::string& path, std::optional<bool> dflt) {
  const ordered_json* v = find(obj, key);
  if (!v) {
    if (!dflt) throw InputError(path + "." + key + ": required key is missing");
    return *dflt;
  }
  return as_bool(*v, path + "." + key);
}

}  // namespace mha
