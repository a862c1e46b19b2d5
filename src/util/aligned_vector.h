#pragma once
// std::vector whose storage starts on a 64-byte cache line. Kernels that
// stream a buffer in full-width AVX-512 loads need it: malloc returns
// 16-byte alignment (and mmap-backed blocks start 16 bytes past a page), so
// every 64-byte load of such a buffer spans two cache lines, which on Intel
// cores costs the tile loops of the flash kernel a sixth of their speed.
#include <cstddef>
#include <new>
#include <vector>

namespace mha {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlign = 64;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlign))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kAlign)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace mha
