#include "backends/registry.h"

#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "backends/ttsim/ttsim_backend.h"
#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace {

std::unique_ptr<Backend> make_reference(const nlohmann::ordered_json& options, const std::string& json_path) {
  for (auto it = options.begin(); it != options.end(); ++it)
    throw InputError(json_path + "." + printable(it.key()) + ": unknown key for backend 'reference' (it takes no options)");
  return make_reference_backend();
}

std::vector<BackendEntry>& table() {
  static std::vector<BackendEntry> t = {
      {"reference", "float64 oracle", make_reference},
      {"cpu", "fast float32", make_cpu_backend},
      {"tt-sim", "Tenstorrent device arithmetic", make_ttsim_backend},
  };
  return t;
}

}  // namespace

const std::vector<BackendEntry>& backend_registry() { return table(); }

void register_backend(std::string name, std::string description, BackendMaker make) {
  for (const BackendEntry& e : table())
    if (e.name == name) throw std::logic_error("register_backend: backend '" + name + "' exists");
  table().push_back({std::move(name), std::move(description), std::move(make)});
}

std::string backend_names() {
  std::string s;
  for (const BackendEntry& e : table()) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

std::string backend_help() {
  std::string s;
  for (const BackendEntry& e : table()) s += (s.empty() ? "" : ", ") + e.name + " (" + e.description + ")";
  return s;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const nlohmann::ordered_json& options,
                                      const std::string& json_path) {
  for (const BackendEntry& e : table())
    if (e.name == name) return e.make(options, json_path);
  throw InputError(json_path + ".name: unknown backend '" + printable(name) + "': expected one of " + backend_names());
}

}  // namespace mha
