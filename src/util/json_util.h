#pragma once
// Typed access to JSON with errors that carry the JSON path, the expected
// type and what was found: "params.d_out: expected a positive integer, found "2"".
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mha {

using ordered_json = nlohmann::ordered_json;

// Parses a JSON file (keys kept in file order); InputError naming the file
// when it cannot be opened, nests deeper than kMaxJsonDepth (checked on the
// text, before parsing) or is not valid JSON (numbers such as 1e400 included).
ordered_json read_json_file(const std::string& path, const char* what);
// The same over text in memory; `where` (already printable) prefixes errors.
ordered_json parse_json_text(std::string_view text, const std::string& where, const char* what);

// Short rendering of a JSON value for messages (strings quoted, long values cut).
std::string json_brief(const ordered_json& v);
// Levels of nesting (a scalar 0, [] 1, [[]] 2), measured without recursion.
int json_depth(const ordered_json& v);
// Rejects keys of `obj` not in `allowed`, naming path.key.
void check_keys(const ordered_json& obj, const std::string& path, std::initializer_list<const char*> allowed);
const ordered_json& require_object(const ordered_json& v, const std::string& path);
const ordered_json* find(const ordered_json& obj, const char* key);

int64_t as_int(const ordered_json& v, const std::string& path, int64_t min_value = INT64_MIN);
double as_number(const ordered_json& v, const std::string& path);
bool as_bool(const ordered_json& v, const std::string& path);
std::string as_string(const ordered_json& v, const std::string& path);
uint64_t as_seed(const ordered_json& v, const std::string& path);

// obj[key] converted, or the default when the key is absent.
int64_t get_int(const ordered_json& obj, const char* key, const std::string& path, std::optional<int64_t> dflt,
                int64_t min_value = INT64_MIN);
bool get_bool(const ordered_json& obj, const char* key, const std::string& path, std::optional<bool> dflt);

}  // namespace mha
