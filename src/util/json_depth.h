#pragma once
// JSON nesting bounded before a JSON library sees the text. nlohmann's parser
// is iterative, but it copies nested values recursively as objects grow, and
// copying, dumping and comparing values recurse too: 100,000 '[' overflow the
// stack. Every JSON text mha parses (configs, bench suites, safetensors
// headers, --backend-option values) goes through this check first.
#include <cstddef>
#include <string_view>

namespace mha {

// Deepest nesting mha accepts; real configs and headers use 3 or 4 levels.
constexpr int kMaxJsonDepth = 64;

// Byte offset of the first '[' or '{' that opens level max_depth + 1, or
// std::string_view::npos when the text nests no deeper than max_depth.
// Brackets inside strings do not count; the text need not be valid JSON.
std::size_t json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace mha
