#include "io/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "io/io_util.h"
#include "io/npy.h"
#include "util/error.h"

namespace mha::io {

using namespace detail;
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(b)) == a; });
}

NamedTensors read_folder(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    // Every NAME.npy is read, so one that is not a regular file (a FIFO, a
    // folder, a link to a device) is refused by read_npy, not skipped.
    if (ends_with(file, ".npy")) names.push_back(file);
  }
  if (ec) fail(where_file(path), "cannot list folder: " + ec.message());
  if (names.empty()) fail(where_file(path), "folder holds no .npy files");
  std::sort(names.begin(), names.end());
  NamedTensors out;
  for (const std::string& file : names) out.emplace_back(file.substr(0, file.size() - 4), read_npy(path + "/" + file));
  return out;
}

std::string names_list(const NamedTensors& all) {
  std::string s;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i == 20) return s + ", ... (" + std::to_string(all.size()) + " in all)";
    s += (i ? ", " : "") + printable(all[i].first);
  }
  return s.empty() ? "none" : s;
}

}  // namespace

Tensor read_npy(const std::string& path) { return decode_npy(read_file_bytes(path), where_file(path)); }

void write_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, encode_npy(t)); }

NamedTensors read_all(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return read_folder(path);
  if (ends_with(path, ".npy")) return {{fs::path(path).stem().string(), read_npy(path)}};
  if (ends_with(path, ".npz")) return read_npz(path);
  if (ends_with(path, ".safetensors")) return read_safetensors(path);
  // No known extension: go by the leading bytes.
  const std::string bytes = read_file_bytes(path);
  if (bytes.compare(0, 6, "\x93NUMPY") == 0) return {{fs::path(path).stem().string(), decode_npy(bytes, where_file(path))}};
  if (bytes.compare(0, 2, "PK") == 0) return read_npz(path);
  fail(where_file(path), "unknown tensor file type: expected .npy, .npz, .safetensors or a folder of .npy files");
}

namespace {

// "a.npz:x" -> {"a.npz", "x"}; a path that exists as given is a whole file.
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  std::error_code ec;
  if (!fs::exists(spec, ec)) {
    std::size_t colon = spec.rfind(':');
    if (colon != std::string::npos && colon > 0) return {spec.substr(0, colon), spec.substr(colon + 1)};
  }
  return {spec, ""};
}

}  // namespace

std::string tensor_spec_file(const std::string& spec) { return split_spec(spec).first; }

Tensor read_tensor(const std::string& spec) {
  auto [file, name] = split_spec(spec);
  NamedTensors all = read_all(file);
  if (name.empty()) {
    if (all.size() == 1) return std::move(all[0].second);
    fail(where_file(file), "holds " + std::to_string(all.size()) + " tensors (" + names_list(all) +
                               "): name one as FILE:NAME");
  }
  for (auto& [n, t] : all)
    if (n == name) return std::move(t);
  fail(where_file(file), "no tensor '" + printable(name) + "'; available: " + names_list(all));
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(where_file(path), std::string("cannot write: ") + std::strerror(errno));
  auto fail_io = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(where_file(path), std::string(what) + ": " + std::strerror(err));
  };
  // mkstemp creates 0600; give the file the mode a plain open() would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) fail_io("cannot write");
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail_io("cannot write");
    done += static_cast<std::size_t>(w);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(where_file(path), std::string("cannot write: ") + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(where_file(path), std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace mha::io
