#include "util/text.h"

#include <cstdint>

namespace mha {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] and its code point, or
// 0 when the bytes there are not one (overlong forms and surrogates included).
std::size_t utf8_seq(std::string_view s, std::size_t i, uint32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t len;
  uint32_t min;
  if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (s.size() - i < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

std::string escape(std::string_view s, std::size_t max_chars, bool escape_backslash) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size();) {
    if (chars >= max_chars) return out + "...";
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    std::size_t len = c >= 0x80 ? utf8_seq(s, i, cp) : 1;
    // U+0080..U+009F are the C1 controls (0x9b is CSI); U+2028/2029 break lines.
    bool escape = c < 0x20 || c == 0x7f || len == 0 || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029;
    if (escape) {
      if (len == 0) len = 1;
      for (std::size_t k = 0; k < len; ++k) {
        const unsigned char e = static_cast<unsigned char>(s[i + k]);
        out += "\\x";
        out += hex[e >> 4];
        out += hex[e & 15];
      }
    } else if (c == '\\' && escape_backslash) {
      out += "\\\\";
    } else {
      out.append(s.data() + i, len);
    }
    i += len;
    ++chars;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_chars) { return escape(s, max_chars, true); }
std::string printable_line(std::string_view s, std::size_t max_chars) { return escape(s, max_chars, false); }

}  // namespace mha
