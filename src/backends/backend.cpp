#include "backends/backend.h"

#include <stdexcept>

#include "util/error.h"

namespace mha {

void require_supported(const Backend& backend, const AttentionSpec& spec, const AttentionInputs& in) {
  if (auto why = backend.supports(spec, in))
    throw InputError("backend " + backend.name() + " cannot run variant " + spec.variant + ": " + *why);
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

}  // namespace mha
