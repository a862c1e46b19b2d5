#pragma once
// How tt-sim's numeric core runs on the host: which lane kernels and how many
// threads. Neither changes a single result bit: every instruction set's
// kernels are bit-identical to the scalar lane models, and every task writes
// only its own rows.
#include <cstdint>
#include <functional>
#include <string>

#include "ttsim/simd/kernels.h"

namespace mha {
class ThreadPool;
}

namespace mha::ttsim {

struct Exec {
  // Scalar runs the lane models themselves (fpu.cpp, sfpu.cpp): the oracle.
  simd::Isa isa = simd::best_isa();
  ThreadPool* pool = nullptr;  // nullptr: the calling thread only

  // The vector kernels for `isa` computing as `arch` does, or nullptr for
  // Scalar.
  const simd::KernelTable* kernels(Arch arch = Arch::Wormhole) const { return simd::kernels_for(isa, arch); }
  int threads() const;
  // fn(task, thread) for every task < count, spread over the pool.
  void parallel_for(int64_t count, const std::function<void(int64_t task, int thread)>& fn) const;
};

}  // namespace mha::ttsim
