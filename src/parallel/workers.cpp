#include "parallel/workers.h"

#include "parallel/world.h"

namespace mha::parallel {

WorkerRelease::~WorkerRelease() {
  if (!released_ && size() > 1) broadcast_int(static_cast<int64_t>(WorkerMode::Stop), 0);
}

void WorkerRelease::go(WorkerMode mode) {
  if (!released_ && size() > 1) broadcast_int(static_cast<int64_t>(mode), 0);
  released_ = true;
}

WorkerMode wait_for_release() {
  const int64_t m = broadcast_int(0, 0);
  switch (m) {
    case static_cast<int64_t>(WorkerMode::Heads): return WorkerMode::Heads;
    case static_cast<int64_t>(WorkerMode::Sequence): return WorkerMode::Sequence;
    case static_cast<int64_t>(WorkerMode::Op): return WorkerMode::Op;
    default: return WorkerMode::Stop;
  }
}

}  // namespace mha::parallel
