#pragma once
// KEY=VALUE items of a repeatable flag (`mha run` and `mha bench`
// --backend-option, `mha op --option`) as the JSON object a config would
// hold, so that a flag and a config key are checked by the same parser
// (the backend's declared options).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mha::cli {

// {"KEY": VALUE, ...}: VALUE as JSON when it parses (2, true, [8, 8]), else
// as a string (bfloat8_b, HiFi4); a later KEY replaces an earlier one.
// InputError naming `flag`: an item without "KEY=", or a VALUE nesting deeper
// than kMaxJsonDepth.
nlohmann::ordered_json parse_key_values(const std::vector<std::string>& items, const std::string& flag);

}  // namespace mha::cli
