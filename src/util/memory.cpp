#include "util/memory.h"

#include <fstream>
#include <string>

namespace mha {

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  return -1;
}

}  // namespace mha
