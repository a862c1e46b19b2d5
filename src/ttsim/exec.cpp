#include "ttsim/exec.h"

#include "util/error.h"
#include "util/text.h"
#include "util/thread_pool.h"

namespace mha::ttsim {

int Exec::threads() const { return pool ? pool->size() : 1; }

void Exec::parallel_for(int64_t count, const std::function<void(int64_t, int)>& fn) const {
  if (pool) {
    pool->parallel_for(count, fn);
    return;
  }
  for (int64_t t = 0; t < count; ++t) fn(t, 0);
}

simd::Isa isa_from_name(const std::string& name) {
  simd::Isa isa;
  if (name == "auto") return simd::best_isa();
  if (name == "scalar") isa = simd::Isa::Scalar;
  else if (name == "avx2") isa = simd::Isa::Avx2;
  else if (name == "avx512") isa = simd::Isa::Avx512;
  else throw InputError("unknown tt-sim kernels '" + printable(name) + "': expected auto, scalar, avx2 or avx512");
  if (isa != simd::Isa::Scalar && !simd::kernels_for(isa))
    throw InputError("tt-sim kernels '" + name + "': this CPU does not support " + name + " (it has " +
                     simd::isa_name(simd::best_isa()) + ")");
  return isa;
}

}  // namespace mha::ttsim
