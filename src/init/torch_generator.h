#pragma once
// PyTorch 1.13's default CPU generator and the float32 fills built on it,
// reproduced bit for bit (x86-64, AVX2 kernels, as Debian's python3-torch
// runs them), so that `init: torch` weights and `rand`/`randn` inputs equal
// what torch.manual_seed(S) + the same calls give in Python.
//
// Every fill consumes generator draws exactly as torch does, so calls can be
// chained in construction order on one generator.
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mha {

class TorchGenerator {
 public:
  // torch's default seed, for a generator nobody seeded.
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;

  explicit TorchGenerator(uint64_t seed = kDefaultSeed) { manual_seed(seed); }

  // As torch.manual_seed: MT19937 keyed by the low 32 bits, normal cache
  // dropped. Python's negative seeds arrive here as their uint64 wrap
  // (torch.manual_seed(-1) == manual_seed(2**64 - 1)).
  void manual_seed(uint64_t seed);

  uint32_t random() { return static_cast<uint32_t>(engine_()); }
  // Two draws, the first one the high half (CPUGeneratorImpl::random64).
  uint64_t random64();

  // Tensor.uniform_(from, to) on n contiguous float32 values in memory order.
  void uniform_(float* data, int64_t n, double from, double to);
  // Tensor.normal_(mean, std) on n contiguous float32 values. Below 16
  // values torch draws double Box-Muller pairs and keeps the unused second
  // value in the generator for the next small normal_ call; at 16 or more it
  // runs the AVX2 float Box-Muller over blocks of 16 (the last, partial
  // block is redrawn over the tensor's final 16 values).
  void normal_(float* data, int64_t n, double mean, double std);

  Tensor rand(const Shape& shape);   // torch.rand(shape)
  Tensor randn(const Shape& shape);  // torch.randn(shape)

  // Rows of torch.rand(shape) (or torch.randn when `normal`) for shape
  // [B, L, ...]: for every batch b, the dim-1 ranges [start, start + len) in
  // the order given, as [B, sum of len, ...], the same numbers the whole
  // tensor holds there, without holding it: values are drawn in 1M-value
  // pieces and draws before a wanted row are skipped. The generator is left
  // after the last wanted value, not after the whole tensor. Ranges must be
  // in increasing order without overlap. A randn tensor whose size is not a
  // multiple of 16 (torch redraws its last 16 values) is drawn whole.
  Tensor rows(const Shape& shape, const std::vector<std::pair<int64_t, int64_t>>& ranges, bool normal);

 private:
  double normal_double(double mean, double std);

  std::mt19937 engine_;  // the standard MT19937, as at::mt19937
  std::optional<double> next_double_normal_;
};

}  // namespace mha
