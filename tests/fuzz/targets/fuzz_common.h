#pragma once
// Shared by the libFuzzer targets. A target feeds the bytes to one of mha's
// readers exactly as the CLI would: an InputError (a clean "bad input" line,
// exit 2) is a correct answer; anything else escaping (another exception, a
// crash, a sanitizer report, a timeout, an allocation beyond the limit) is a
// bug. Checks that must hold for every accepted input call require().
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "util/error.h"

namespace mha::fuzz {

inline std::string_view as_view(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Aborts (a crash libFuzzer records) when an invariant does not hold.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

// Runs f; an InputError is an accepted answer and must say where and what
// on one line.
template <class F>
void run_expecting_input_errors(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    std::string_view msg = e.what();
    require(!msg.empty(), "empty InputError message");
    require(msg.find('\n') == std::string_view::npos, "InputError message spans lines");
  }
}

}  // namespace mha::fuzz
