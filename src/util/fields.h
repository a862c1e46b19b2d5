#pragma once
// Fields declared once. A struct of options or op attributes lists its
// fields in one member template, each with its name, its member (whose type
// and initial value are the type and default) and its help:
//
//   template <class V> void fields(V& v) {
//     v("q_chunk_size", q_chunk_size, "rows of Q per chunk (default 32)");
//     v("cur_pos", cur_pos, "one position per user", fields::kRuntime);
//   }
//
// and the visitors below make everything else from that list: the parser
// (with "where.name: expected ..., found ..." and the "expected one of"
// message for an unknown key), the program-cache key, the JSON report and
// the help lines. gemma.cpp's argument visitor has this shape.
//
// A field's type says how it is parsed and printed (Codec<T>): bool,
// integers, floating point, strings, std::optional and std::vector of
// those, and enums, which name their values with a `field_choices(E*)`
// returning {name, value} pairs, found by argument-dependent lookup in the
// enum's namespace.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace mha::fields {

using json = nlohmann::ordered_json;

enum Flags : unsigned {
  kNone = 0,
  // A runtime argument (cur_pos, a page table): the program reads it, it
  // does not key the program (TT-NN's runtime args).
  kRuntime = 1,
  // Set by the op from its inputs or the backend options, not a user key.
  kDerived = 2,
  // Also a command-line flag of its own: `mha op --cur-pos` for cur_pos.
  kFlag = 4,
};

template <class T, class Enable = void>
struct Codec;

// A field's own parser, where its type's Codec is not the whole rule (a
// range, a value that depends on another field, a message worth keeping):
// sets v from j or throws InputError naming `where` ("backend.threads").
template <class T>
using ParseFn = std::function<void(const json& j, T& v, const std::string& where)>;
template <class T>
struct NonDeduced {
  using type = T;
};
template <class T>
using Parser = typename NonDeduced<ParseFn<T>>::type;

template <>
struct Codec<bool> {
  static std::string expected() { return "true or false"; }
  static std::string plural() { return "booleans"; }
  static bool parse(const json& j, bool& v) {
    if (!j.is_boolean()) return false;
    v = j.get<bool>();
    return true;
  }
  static json to_json(bool v) { return v; }
  static std::string text(bool v) { return v ? "1" : "0"; }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static std::string expected() { return "an integer"; }
  static std::string plural() { return "integers"; }
  static bool parse(const json& j, T& v) {
    if (!j.is_number_integer()) return false;
    const int64_t x = j.get<int64_t>();
    if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return false;
    v = static_cast<T>(x);
    return true;
  }
  static json to_json(T v) { return v; }
  static std::string text(T v) { return std::to_string(v); }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static std::string expected() { return "a finite number"; }
  static std::string plural() { return "finite numbers"; }
  static bool parse(const json& j, T& v) {
    if (!j.is_number() || !std::isfinite(j.get<double>())) return false;
    v = static_cast<T>(j.get<double>());
    return true;
  }
  static json to_json(T v) { return v; }
  static std::string text(T v) { return json(v).dump(); }
};

template <>
struct Codec<std::string> {
  static std::string expected() { return "a string"; }
  static std::string plural() { return "strings"; }
  static bool parse(const json& j, std::string& v) {
    if (!j.is_string()) return false;
    v = j.get<std::string>();
    return true;
  }
  static json to_json(const std::string& v) { return v; }
  static std::string text(const std::string& v) { return v; }
};

// Enums: `field_choices(static_cast<E*>(nullptr))` lists {name, value}.
template <class E>
struct Codec<E, std::enable_if_t<std::is_enum_v<E>>> {
  static std::string expected() {
    const auto& c = field_choices(static_cast<E*>(nullptr));
    std::string s;
    for (size_t i = 0; i < c.size(); ++i)
      s += std::string(i == 0 ? "" : i + 1 == c.size() ? " or " : ", ") + "\"" + c[i].first + "\"";
    return s;
  }
  static std::string plural() { return "names (" + expected() + ")"; }
  static bool parse(const json& j, E& v) {
    if (!j.is_string()) return false;
    for (const auto& [name, value] : field_choices(static_cast<E*>(nullptr)))
      if (j.get<std::string>() == name) {
        v = value;
        return true;
      }
    return false;
  }
  static std::string text(E v) {
    for (const auto& [name, value] : field_choices(static_cast<E*>(nullptr)))
      if (value == v) return name;
    return "?";
  }
  static json to_json(E v) { return text(v); }
};

template <class T>
struct Codec<std::optional<T>> {
  static std::string expected() { return Codec<T>::expected(); }
  static std::string plural() { return Codec<T>::plural(); }
  static bool parse(const json& j, std::optional<T>& v) {
    T x{};
    if (!Codec<T>::parse(j, x)) return false;
    v = std::move(x);
    return true;
  }
  static json to_json(const std::optional<T>& v) { return v ? Codec<T>::to_json(*v) : json(nullptr); }
  static std::string text(const std::optional<T>& v) { return v ? Codec<T>::text(*v) : "none"; }
};

// Arrays: non-empty, every element of T.
template <class T>
struct Codec<std::vector<T>> {
  static std::string expected() { return "an array of " + Codec<T>::plural() + " (at least one)"; }
  static std::string plural() { return "arrays of " + Codec<T>::plural(); }
  static bool parse(const json& j, std::vector<T>& v) {
    if (!j.is_array() || j.empty()) return false;
    std::vector<T> out;
    for (const auto& x : j) {
      T e{};
      if (!Codec<T>::parse(x, e)) return false;
      out.push_back(std::move(e));
    }
    v = std::move(out);
    return true;
  }
  static json to_json(const std::vector<T>& v) {
    json a = json::array();
    for (const T& x : v) a.push_back(Codec<T>::to_json(x));
    return a;
  }
  static std::string text(const std::vector<T>& v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Codec<T>::text(v[i]);
    return s + ")";
  }
};

// --- visitors -------------------------------------------------------------

// "name=value,..." over the fields that key a program (not kRuntime).
struct KeyVisitor {
  std::string key;
  template <class T>
  void operator()(const char* name, const T& v, const char*, unsigned flags = kNone, const Parser<T>& = nullptr) {
    if (flags & kRuntime) return;
    key += std::string(key.empty() ? "" : ",") + name + "=" + Codec<T>::text(v);
  }
};

// {"name": value, ...} over every field.
struct JsonVisitor {
  json j = json::object();
  template <class T>
  void operator()(const char* name, const T& v, const char*, unsigned = kNone, const Parser<T>& = nullptr) {
    j[name] = Codec<T>::to_json(v);
  }
};

// The user's keys (not kDerived), with their help and default (a help
// that names its default keeps its own words).
struct HelpVisitor {
  std::vector<std::pair<std::string, std::string>> lines;  // name, "help (default X)"
  bool show_defaults = true;
  template <class T>
  void operator()(const char* name, const T& v, const char* help, unsigned flags = kNone,
                  const Parser<T>& = nullptr) {
    if (flags & kDerived) return;
    std::string h = help;
    if (show_defaults && !(flags & kRuntime) && h.find("default") == std::string::npos)
      h += " (default " + Codec<T>::text(v) + ")";
    lines.emplace_back(name, h);
  }
};

// The user's key names, in declaration order.
struct NamesVisitor {
  std::vector<std::string> names;
  template <class T>
  void operator()(const char* name, const T&, const char*, unsigned flags = kNone, const Parser<T>& = nullptr) {
    if (!(flags & kDerived)) names.push_back(name);
  }
};

// Sets every user key present in `obj`; a value of the wrong type throws
// InputError "WHERE.name: expected ..., found ...".
struct ParseVisitor {
  const json& obj;
  std::string where;
  std::set<std::string> taken;
  template <class T>
  void operator()(const char* name, T& v, const char*, unsigned flags = kNone, const Parser<T>& parse = nullptr) {
    if ((flags & kDerived) || !obj.contains(name)) return;
    taken.insert(name);
    if (parse) return parse(obj[name], v, where + "." + name);
    if (!Codec<T>::parse(obj[name], v))
      throw InputError(where + "." + name + ": expected " + Codec<T>::expected() + ", found " +
                       obj[name].dump().substr(0, 80));
  }
};

// --- one-call helpers over a struct with `template <class V> void fields(V&)` --

template <class S>
std::string key_of(S s) {
  KeyVisitor v;
  s.fields(v);
  return v.key;
}

template <class S>
json json_of(S s) {
  JsonVisitor v;
  s.fields(v);
  return v.j;
}

template <class S>
std::vector<std::string> names_of(S s) {
  NamesVisitor v;
  s.fields(v);
  return v.names;
}

inline std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Parses obj's keys into s (InputError naming where.key); a key s does not
// declare is refused "WHERE.key: unknown WHAT (expected one of a, b, ...),
// found V" unless `skip` lists it.
template <class S>
void parse_into(S& s, const json& obj, const std::string& where, const char* what,
                const std::vector<std::string>& skip = {}) {
  if (obj.is_null()) return;
  if (!obj.is_object()) throw InputError(where + ": expected an object, found " + obj.dump().substr(0, 80));
  ParseVisitor p{obj, where, {}};
  s.fields(p);
  for (const auto& [key, v] : obj.items()) {
    if (p.taken.count(key)) continue;
    bool skipped = false;
    for (const std::string& k : skip) skipped = skipped || k == key;
    if (skipped) continue;
    throw InputError(where + "." + key + ": unknown " + what + " (expected one of " + join(names_of(s)) +
                     "), found " + v.dump().substr(0, 80));
  }
}

}  // namespace mha::fields
