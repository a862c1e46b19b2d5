#include "io/io_util.h"

#include <cstdio>

#include "util/error.h"

namespace mha::io::detail {

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

}  // namespace mha::io::detail
