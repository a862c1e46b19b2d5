#pragma once
// Asks Linux to back a large fresh buffer with transparent huge pages before
// it is first touched. A cold run otherwise takes one page fault per 4 KiB
// of every new workspace (tens of thousands for seed 002's shape), which is
// most of the difference between a first run and a cached one.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace mha {

inline void advise_huge_pages(void* p, std::size_t n) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  if (n < 2 * kHuge) return;
  auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint: failure is harmless
}

}  // namespace mha
