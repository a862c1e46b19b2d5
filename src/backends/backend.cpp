#include "backends/backend.h"

#include <map>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "backends/reference/reference_backend.h"
#include "backends/ttsim/ttsim_backend.h"
#include "util/error.h"
#include "util/text.h"

namespace mha {

void require_supported(const Backend& backend, const AttentionSpec& spec, const AttentionInputs& in) {
  if (auto why = backend.supports(spec, in))
    throw InputError("backend " + backend.name() + " cannot run variant " + spec.variant + ": " + *why);
}

const char* cache_dtype_name(CacheDtype d) {
  switch (d) {
    case CacheDtype::Float32: return "float32";
    case CacheDtype::Bfloat16: return "bfloat16";
  }
  return "?";
}

std::unique_ptr<DecodeSession> Backend::start_decode(const AttentionSpec& spec, const DecodeOptions& opt) {
  (void)opt;
  auto why = supports_decode(spec);
  throw InputError("backend " + name() + " cannot decode variant " + spec.variant + ": " +
                   (why ? *why : std::string("no KV-cache decode")));
}

void Backend::project_rows(const Projection&, const void*, int64_t, void*) {
  throw std::logic_error("backend " + name() + ": project_rows without partial attention");
}

void Backend::attend_partial(const AttentionSpec&, const Tensor&, const QueryBlock&, const KeyBlock&, SoftmaxState&) {
  throw std::logic_error("backend " + name() + ": attend_partial without partial attention");
}

namespace {
std::map<std::string, MakeBackendFn>& registered() {
  static std::map<std::string, MakeBackendFn> m;
  return m;
}
}  // namespace

void register_backend(const std::string& name, MakeBackendFn make) { registered()[name] = make; }

std::unique_ptr<Backend> make_backend(const std::string& name, const nlohmann::ordered_json& options,
                                      const std::string& json_path) {
  if (auto it = registered().find(name); it != registered().end()) return it->second(options, json_path);
  if (name == "reference") {
    for (auto it = options.begin(); it != options.end(); ++it)
      throw InputError(json_path + "." + printable(it.key()) + ": unknown key for backend 'reference' (it takes no options)");
    return make_reference_backend();
  }
  if (name == "cpu") return make_cpu_backend(options, json_path);
  if (name == "tt-sim") return make_ttsim_backend(options, json_path);
  throw InputError(json_path + ".name: unknown backend '" + printable(name) + "': expected reference, cpu or tt-sim");
}

}  // namespace mha
