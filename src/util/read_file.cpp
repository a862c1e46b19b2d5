#include "util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/error.h"
#include "util/text.h"

namespace mha {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(printable(path, 400) + ": " + what);
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a pipe (FIFO)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

void require_regular(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) fail(path, std::string("is ") + kind_of(st.st_mode) + ", expected a regular file");
}

}  // namespace

int open_regular_file(const std::string& path, uint64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  require_regular(path, st);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    require_regular(path, st);
    fail(path, std::string("cannot stat: ") + std::strerror(errno));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

std::string read_input_file(const std::string& path) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);
  std::string out;
  try {
    out.resize(size);
    uint64_t got = 0;
    while (got < size) {
      const ssize_t n = ::read(fd, out.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(path, std::string("read error: ") + std::strerror(errno));
      if (n == 0) fail(path, "read error: the file shrank while it was read");
      got += static_cast<uint64_t>(n);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

}  // namespace mha
