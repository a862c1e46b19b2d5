#include "util/user_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mha {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

std::string cache_folder() {
  if (std::string d = env("MHA_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/mha";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/mha";
  return {};
}

// mkdir -p, ignoring folders that already exist.
bool make_folders(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

nlohmann::json load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return nlohmann::json::object();
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    std::fprintf(stderr, "mha: warning: ignoring the unreadable cache file %s\n", path.c_str());
    return nlohmann::json::object();
  }
  return j;
}

}  // namespace

std::string user_cache_path() {
  const std::string folder = cache_folder();
  return folder.empty() ? std::string() : folder + "/store.json";
}

std::optional<nlohmann::json> user_cache_get(const std::string& kind, const std::string& key) {
  const std::string path = user_cache_path();
  if (path.empty()) return std::nullopt;
  const nlohmann::json all = load(path);
  auto k = all.find(kind);
  if (k == all.end() || !k->is_object()) return std::nullopt;
  auto e = k->find(key);
  if (e == k->end()) return std::nullopt;
  return *e;
}

bool user_cache_put(const std::string& kind, const std::string& key, const nlohmann::json& value) {
  const std::string folder = cache_folder();
  auto warn = [&](const std::string& what) {
    std::fprintf(stderr, "mha: warning: cannot store in the cache folder %s: %s\n", folder.c_str(), what.c_str());
    return false;
  };
  if (folder.empty()) return warn("no MHA_CACHE_DIR, XDG_CACHE_HOME or HOME");
  if (!make_folders(folder)) return warn(std::strerror(errno));
  const std::string path = folder + "/store.json";
  nlohmann::json all = load(path);
  if (!all[kind].is_object()) all[kind] = nlohmann::json::object();
  all[kind][key] = value;
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return warn(std::strerror(errno));
  const std::string text = all.dump(1) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return warn(std::strerror(errno));
  }
  return true;
}

}  // namespace mha
