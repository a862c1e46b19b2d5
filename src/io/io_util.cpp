#include "io/io_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "util/error.h"

namespace mha::io::detail {

std::string printable(std::string_view s, std::size_t max_len) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max_len) return out + "...";
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void fail(const std::string& where, const std::string& what) { throw InputError(where + ": " + what); }

std::string hex_prefix(std::string_view bytes, std::size_t n) {
  if (bytes.empty()) return "an empty file";
  std::string out;
  char buf[8];
  for (std::size_t i = 0; i < bytes.size() && i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", static_cast<unsigned char>(bytes[i]));
    out += buf;
  }
  return "bytes " + out;
}

std::string read_file_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(where_file(path), std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(where_file(path), "is a folder, expected a file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(where_file(path), std::string("cannot open: ") + std::strerror(errno));
  std::string out;
  // Sized from the file itself, which exists on disk, so this is not an
  // attacker-chosen allocation; the read loop still copes with a file that
  // changes size while being read.
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.append(buf, got);
  if (std::ferror(f.get())) fail(where_file(path), std::string("read error: ") + std::strerror(errno));
  return out;
}

}  // namespace mha::io::detail
