#include "util/build_info.h"

#include <ctime>
#include <fstream>
#include <string>

#ifndef MHA_GIT_COMMIT
#define MHA_GIT_COMMIT "unknown"  // CMakeLists.txt defines it for this file only
#endif

namespace mha {

const char* build_commit() { return MHA_GIT_COMMIT; }

std::string machine_key(const std::string& isa, int threads) {
  return "cpu=" + cpu_model() + ";isa=" + isa + ";threads=" + std::to_string(threads) + ";build=" + build_commit();
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace mha
