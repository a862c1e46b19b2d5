#include "bench/peak_memory.h"

#include <fstream>
#include <string>

namespace mha::bench {

void reset_peak_memory() {
  std::ofstream f("/proc/self/clear_refs");
  if (f) f << "5";  // "5" resets the peak RSS to the current RSS
}

double peak_memory_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0.0;
}

}  // namespace mha::bench
