#pragma once
// The tiny Hugging Face folders of scripts/make_hf_example.py, written once
// per test binary into a temporary folder, and running `mha` on them.
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace mha::test {

// The folder holding every example (OUT/llama, OUT/gemma3_mm, ...), made on
// first use.
const std::string& hf_examples();
inline std::string hf_example(const std::string& name) { return hf_examples() + "/" + name; }
// The Hugging Face cache layout's model folder (a snapshot of symlinks).
inline std::string hf_cache_snapshot() {
  return hf_example("hf_cache/models--mha--tiny/snapshots/0123456789abcdef0123456789abcdef01234567");
}

// `mha inspect DIR --json`, parsed (fails the test on a non-zero exit).
nlohmann::json hf_inspect(const std::string& dir);

// Expects exit 2 and exactly one line on stderr holding `needle`.
void expect_one_line_error(const CommandResult& r, const std::string& needle);

}  // namespace mha::test
