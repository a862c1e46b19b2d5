#include "backends/backend.h"

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

}  // namespace mha
