#pragma once
// The table of backends, as variants/registry.h is of variants: a name, a
// one-line description and a factory each. make_backend (backends/backend.h),
// the CLI's --backend help and the unknown-name error read it, so a backend
// added here is known everywhere. register_backend adds one at run time: a
// test registers a test backend the same way.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"

namespace mha {

// `options` is the config's "backend" object (without "name"); `json_path`
// locates it for error messages. Throws InputError on a bad option.
using BackendMaker =
    std::function<std::unique_ptr<Backend>(const nlohmann::ordered_json& options, const std::string& json_path)>;

struct BackendEntry {
  std::string name;         // the config's backend.name, --backend
  std::string description;  // a few words for --help
  BackendMaker make;
};

// reference, cpu, tt-sim, then any registered, in that order.
const std::vector<BackendEntry>& backend_registry();

// Adds a backend under `name` (std::logic_error when the name is taken).
// Call it before any thread makes a backend: the table is not locked.
void register_backend(std::string name, std::string description, BackendMaker make);

// "reference, cpu, tt-sim" (names only) and "reference (float64 ...), cpu
// (...)" (with descriptions), for messages and help text.
std::string backend_names();
std::string backend_help();

}  // namespace mha
