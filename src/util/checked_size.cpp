#include "util/checked_size.h"

#include <unistd.h>

#include <limits>

#include "util/error.h"

namespace mha {

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}

int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  if (a < 0 || b < 0) throw InputError(what + ": expected non-negative sizes");
  if (a != 0 && b > kMax / a) throw InputError(what + " overflows 64-bit sizes");
  return a * b;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  if (a < 0 || b < 0) throw InputError(what + ": expected non-negative sizes");
  if (b > kMax - a) throw InputError(what + " overflows 64-bit sizes");
  return a + b;
}

std::string field(const std::string& name, int64_t value) { return name + " (" + std::to_string(value) + ")"; }

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0 || pages > kMax / page) return kMax;
  return static_cast<int64_t>(pages) * page;
}

int64_t check_fits_memory(int64_t bytes, const std::string& what) {
  const int64_t phys = physical_memory_bytes();
  if (bytes > phys)
    throw InputError(what + ": " + std::to_string(bytes) + " bytes exceed this machine's " + std::to_string(phys) +
                     " bytes of memory");
  return bytes;
}

int64_t check_bytes(int64_t elements, int64_t element_bytes, const std::string& what) {
  const int64_t bytes = checked_mul(elements, element_bytes, what + " (" + std::to_string(elements) + " elements of " +
                                                                  std::to_string(element_bytes) + " bytes)");
  const int64_t phys = physical_memory_bytes();
  if (bytes > phys)
    throw InputError(what + ": " + std::to_string(bytes) + " bytes (" + std::to_string(elements) + " elements of " +
                     std::to_string(element_bytes) + " bytes) exceed this machine's " + std::to_string(phys) +
                     " bytes of memory");
  return bytes;
}

}  // namespace mha
