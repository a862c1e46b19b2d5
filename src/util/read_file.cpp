#include "util/read_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(printable(path, 400) + ": " + what);
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_input_file(const std::string& path, uint64_t max_stream_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  const bool regular = S_ISREG(st.st_mode), fifo = S_ISFIFO(st.st_mode);
  if (!regular && !fifo) fail(path, std::string("is ") + kind_of(st.st_mode) + ", expected a file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno));
  // stat and fopen may see different files if the path is replaced between
  // them; check again on the opened descriptor.
  if (::fstat(fileno(f.get()), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)))
    fail(path, std::string("is ") + kind_of(st.st_mode) + ", expected a file");
  std::string out;
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  const uint64_t limit = S_ISREG(st.st_mode) ? UINT64_MAX : max_stream_bytes;
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    if (got > limit - out.size())
      fail(path, "pipe holds more than " + std::to_string(limit) + " bytes, the most read from a pipe");
    out.append(buf, got);
  }
  if (std::ferror(f.get())) fail(path, std::string("read error: ") + std::strerror(errno));
  return out;
}

}  // namespace mha
