#pragma once
// Dropout decisions that every backend shares, so that backends agree in
// training mode: element (b, h, i, j) is kept iff a hash of (seed, index)
// maps to a uniform number >= p. (PyTorch's own Bernoulli stream is not
// reproduced; see docs/RUN.md, "Semantics where a seed or PyTorch leaves room".)
#include <cstdint>

namespace mha {

inline bool dropout_keep(uint64_t seed, uint64_t flat_index, double p) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (flat_index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  double u = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
  return u >= p;
}

}  // namespace mha
