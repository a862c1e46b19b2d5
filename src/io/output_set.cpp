#include "io/output_set.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "io/io_util.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace mha::io {

namespace fs = std::filesystem;
using detail::where_file;

namespace {

// "FLAG PATH" for messages.
std::string named(const std::string& flag, const std::string& path) { return flag + " " + where_file(path); }

std::string folder_of(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" names dir itself
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

std::string leaf_of(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The folder a new file or folder goes into must exist and be a folder.
void require_folder(const std::string& flag, const std::string& path, const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw InputError(named(flag, path) + ": folder " + where_file(dir) + " does not exist (" + std::strerror(errno) + ")");
  if (!S_ISDIR(st.st_mode)) throw InputError(named(flag, path) + ": " + where_file(dir) + " is not a folder");
}

// A fresh hidden temporary next to `leaf` in `dir`; proves the folder is writable.
std::string make_temp(const std::string& flag, const std::string& path, const std::string& dir, const std::string& leaf,
                      bool folder) {
  std::string tmp = (fs::path(dir) / ("." + leaf + ".mha-tmp-XXXXXX")).string();
  bool ok = folder ? ::mkdtemp(tmp.data()) != nullptr : [&] {
    int fd = ::mkstemp(tmp.data());
    return fd >= 0 && ::close(fd) == 0;
  }();
  if (!ok)
    throw InputError(named(flag, path) + ": cannot write in folder " + where_file(dir) + ": " + std::strerror(errno));
  if (folder) {  // mkdtemp makes it 0700; give it the mode a plain mkdir would
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(tmp.c_str(), 0777 & ~mask);
  }
  return tmp;
}

}  // namespace

OutputSet::~OutputSet() { cleanup(); }

OutputSet::Id OutputSet::identify(const std::string& path) {
  Id id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(folder_of(path), ec), ec);
  id.resolved = (dir / leaf_of(path)).string();
  return id;
}

void OutputSet::add_input(const std::string& path) {
  if (path.empty() || path == "-") return;
  Input in{path, identify(path)};
  if (!in.id.exists) return;
  inputs_.push_back(in);
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) inputs_.push_back({it->path().string(), identify(it->path().string())});
}

void OutputSet::check_distinct(const std::string& flag, const std::string& path, const Id& id) const {
  auto same = [&](const Id& other) {
    return (id.exists && other.exists && id.dev == other.dev && id.ino == other.ino) || id.resolved == other.resolved;
  };
  for (const Input& in : inputs_)
    if (same(in.id))
      throw InputError(named(flag, path) + ": is the same file as the input " + where_file(in.path) +
                       "; refusing to overwrite an input");
  for (const auto& o : outputs_)
    if (same(o->id))
      throw InputError(named(flag, path) + ": is the same file as " + named(o->flag, o->path) +
                       "; give each output its own file");
}

void OutputSet::add_file(const std::string& flag, const std::string& path) {
  if (path.empty()) throw InputError(flag + ": expected a file name, found an empty string");
  auto out = std::make_unique<Output>();
  out->flag = flag;
  out->path = path;
  out->id = identify(path);
  std::error_code ec;
  if (out->id.exists && fs::is_directory(path, ec))
    throw InputError(named(flag, path) + ": is a folder, expected a file name");
  const std::string dir = folder_of(path);
  require_folder(flag, path, dir);
  check_distinct(flag, path, out->id);
  out->tmp = make_temp(flag, path, dir, leaf_of(path), false);
  outputs_.push_back(std::move(out));
}

void OutputSet::add_folder(const std::string& flag, const std::string& path) {
  if (path.empty()) throw InputError(flag + ": expected a folder name, found an empty string");
  auto out = std::make_unique<Output>();
  out->flag = flag;
  out->path = path;
  out->folder = true;
  out->id = identify(path);
  std::error_code ec;
  if (out->id.exists && !fs::is_directory(path, ec))
    throw InputError(named(flag, path) + ": exists and is not a folder");
  check_distinct(flag, path, out->id);
  if (out->id.exists) {
    out->folder_exists = true;
    // Probe: the staged files will be created here.
    std::string probe = make_temp(flag, path, path, "probe", false);
    ::unlink(probe.c_str());
  } else {
    const std::string dir = folder_of(path);
    require_folder(flag, path, dir);
    out->tmp = make_temp(flag, path, dir, leaf_of(path), true);
  }
  outputs_.push_back(std::move(out));
}

OutputSet::Output& OutputSet::find(const std::string& path, bool folder) {
  for (auto& o : outputs_)
    if (o->path == path && o->folder == folder) return *o;
  throw std::logic_error("OutputSet: " + path + " was not declared as an output");
}

void OutputSet::stage(const std::string& path, const std::function<void(const std::string&)>& write) {
  Output& o = find(path, false);
  try {
    write(o.tmp);
  } catch (const InputError& e) {
    throw InputError(named(o.flag, o.path) + ": cannot write: " + e.what());
  }
  o.staged = true;
}

std::string OutputSet::temporary(const std::string& path) { return find(path, false).tmp; }

void OutputSet::mark_staged(const std::string& path) { find(path, false).staged = true; }

void OutputSet::stage_bytes(const std::string& path, const std::string& bytes) {
  stage(path, [&](const std::string& tmp) { write_file_atomic(tmp, bytes); });
}

void OutputSet::stage_in_folder(const std::string& folder, const std::string& name,
                                const std::function<void(const std::string&)>& write) {
  Output& o = find(folder, true);
  const std::string final_path = (fs::path(folder) / name).string();
  std::string tmp;
  if (o.folder_exists) {
    Id id = identify(final_path);
    std::error_code ec;
    if (id.exists && fs::is_directory(final_path, ec))
      throw InputError(named(o.flag, final_path) + ": is a folder, expected a file name");
    check_distinct(o.flag, final_path, id);
    tmp = make_temp(o.flag, final_path, folder, name, false);
    o.folder_files.emplace_back(tmp, final_path);
  } else {
    tmp = (fs::path(o.tmp) / name).string();
  }
  try {
    write(tmp);
  } catch (const InputError& e) {
    throw InputError(named(o.flag, final_path) + ": cannot write: " + e.what());
  }
  o.staged = true;
}

void OutputSet::commit() {
  auto rename_or_fail = [](const Output& o, const std::string& from, const std::string& to) {
    if (::rename(from.c_str(), to.c_str()) != 0)
      throw InputError(named(o.flag, to) + ": cannot write: " + std::strerror(errno));
  };
  for (auto& o : outputs_) {
    if (!o->staged) continue;
    if (!o->folder) {
      rename_or_fail(*o, o->tmp, o->path);
      o->tmp.clear();
    } else if (o->folder_exists) {
      for (auto& [tmp, final_path] : o->folder_files) {
        rename_or_fail(*o, tmp, final_path);
        tmp.clear();
      }
    } else {
      rename_or_fail(*o, o->tmp, o->path);
      o->tmp.clear();
    }
  }
}

std::FILE* OutputSet::open_stream(const std::string& path) {
  Output& o = find(path, false);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw InputError(named(o.flag, o.path) + ": cannot write: " + std::strerror(errno));
  streams_.push_back(f);
  return f;
}

void OutputSet::cleanup() noexcept {
  for (std::FILE* f : streams_) std::fclose(f);
  streams_.clear();
  for (auto& o : outputs_) {
    for (auto& [tmp, final_path] : o->folder_files)
      if (!tmp.empty()) ::unlink(tmp.c_str());
    if (o->tmp.empty()) continue;
    std::error_code ec;
    if (o->folder) fs::remove_all(o->tmp, ec);
    else ::unlink(o->tmp.c_str());
    o->tmp.clear();
  }
}

}  // namespace mha::io
