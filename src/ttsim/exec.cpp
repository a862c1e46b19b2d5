#include "ttsim/exec.h"

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

}  // namespace mha::ttsim
