#include "cli/key_values.h"

#include "util/error.h"
#include "util/json_depth.h"
#include "util/text.h"

namespace mha::cli {

nlohmann::ordered_json parse_key_values(const std::vector<std::string>& items, const std::string& flag) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(flag + ": expected KEY=VALUE (e.g. threads=2), found '" + printable(item) + "'");
    const std::string value = item.substr(eq + 1);
    // Checked on the text: a deeper value would recurse as it is copied.
    if (json_too_deep_at(value) != std::string::npos)
      throw InputError(flag + ": value nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(value, nullptr, false);
    o[item.substr(0, eq)] = v.is_discarded() ? nlohmann::ordered_json(value) : v;
  }
  return o;
}

}  // namespace mha::cli
