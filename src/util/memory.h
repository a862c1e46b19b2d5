#pragma once
// This process's memory, as the kernel counts it.
#include <cstdint>

namespace mha {

// Peak resident set size in bytes (VmHWM of /proc/self/status: the most
// physical memory the process has held at once), or -1 where the kernel
// does not say (not Linux).
int64_t peak_rss_bytes();

}  // namespace mha
