#include "io/npy_header.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "io/io_util.h"

namespace mha::io::detail {
namespace {

// Only the literal forms numpy writes (or older numpy wrote, such as "2L")
// are accepted; anything else is reported at its byte offset.
struct PyValue {
  enum Kind { Str, Int, Bool, None, Tuple, List } kind = None;
  std::string str;
  int64_t i = 0;
  bool b = false;
  std::vector<PyValue> items;
};

class Parser {
 public:
  Parser(std::string_view s, const std::string& where) : s_(s), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') { ++pos_; break; }
      PyValue key = value(0);
      if (key.kind != PyValue::Str) error("dict key is not a string");
      skip_ws();
      expect(':');
      std::size_t at = pos_;
      PyValue v = value(0);
      // numpy's literal_eval keeps the last of repeated keys; a header that
      // repeats one is not what numpy writes, and was once read as two
      // shapes concatenated, so it is refused.
      const bool seen = key.str == "descr" ? have_descr : key.str == "fortran_order" ? have_order
                        : key.str == "shape" ? have_shape : false;
      if (seen) error("key '" + key.str + "' appears twice", at);
      if (key.str == "descr") {
        if (v.kind == PyValue::List) error("structured dtypes are not supported");
        if (v.kind != PyValue::Str) error("'descr' is not a string", at);
        h.descr = v.str;
        have_descr = true;
      } else if (key.str == "fortran_order") {
        if (v.kind != PyValue::Bool) error("'fortran_order' is not True or False", at);
        h.fortran_order = v.b;
        have_order = true;
      } else if (key.str == "shape") {
        if (v.kind != PyValue::Tuple) error("'shape' is not a tuple of integers", at);
        for (const PyValue& d : v.items) {
          if (d.kind != PyValue::Int) error("'shape' is not a tuple of integers", at);
          if (d.i < 0) error("'shape' has a negative dimension " + std::to_string(d.i), at);
          h.shape.push_back(d.i);
        }
        have_shape = true;
      } else {
        error("unexpected key '" + printable(key.str) + "': expected only 'descr', 'fortran_order', 'shape'");
      }
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      skip_ws();
      if (peek() != '}') error(std::string("expected ',' or '}'"));
    }
    skip_ws();
    if (pos_ != s_.size()) error("unexpected text after the dict");
    if (!have_descr) error("key 'descr' is missing");
    if (!have_order) error("key 'fortran_order' is missing");
    if (!have_shape) error("key 'shape' is missing");
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& what, std::size_t at = std::string::npos) {
    fail(where_, "bad .npy header: " + what + " at header byte " + std::to_string(at == std::string::npos ? pos_ : at));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c || pos_ >= s_.size()) {
      std::string found = pos_ < s_.size() ? "'" + printable(s_.substr(pos_, 1)) + "'" : "end of header";
      error(std::string("expected '") + c + "', found " + found);
    }
    ++pos_;
  }
  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  PyValue value(int depth) {
    // Nesting is bounded so a hostile header cannot exhaust the stack.
    if (depth > 8) error("values nested too deeply");
    skip_ws();
    PyValue v;
    char c = peek();
    if (pos_ >= s_.size()) error("unexpected end of header");
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Str;
      ++pos_;
      while (true) {
        if (pos_ >= s_.size()) error("unterminated string");
        char d = s_[pos_++];
        if (d == c) break;
        if (d == '\\') {
          if (pos_ >= s_.size()) error("unterminated string");
          d = s_[pos_++];
        }
        v.str += d;
      }
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      v.kind = c == '(' ? PyValue::Tuple : PyValue::List;
      ++pos_;
      while (true) {
        skip_ws();
        if (peek() == close) { ++pos_; break; }
        // Only 'shape' holds a tuple; bounding every tuple and list keeps a
        // 1 MiB header from building hundreds of thousands of values.
        if (v.items.size() == kMaxNpyDims)
          error("a tuple or list holds more than " + std::to_string(kMaxNpyDims) +
                " items: a shape has at most numpy's " + std::to_string(kMaxNpyDims) + " dimensions");
        v.items.push_back(value(depth + 1));
        skip_ws();
        if (peek() == ',') { ++pos_; continue; }
        if (peek() != close) error(std::string("expected ',' or '") + close + "'");
      }
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::Int;
      bool neg = c == '-';
      if (c == '-' || c == '+') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) error("bad integer");
      uint64_t n = 0;
      while (peek() >= '0' && peek() <= '9') {
        uint64_t digit = static_cast<uint64_t>(peek() - '0');
        if (n > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10)
          error("integer does not fit in 64 bits");
        n = n * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 long literal
      v.i = neg ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
    } else if (word("True")) {
      v.kind = PyValue::Bool;
      v.b = true;
    } else if (word("False")) {
      v.kind = PyValue::Bool;
    } else if (word("None")) {
      v.kind = PyValue::None;
    } else {
      error("unexpected '" + printable(s_.substr(pos_, 1)) + "'");
    }
    return v;
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text, const std::string& where) { return Parser(text, where).parse(); }

}  // namespace mha::io::detail
