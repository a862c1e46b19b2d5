#pragma once
// The cpu backend uses the shared pool (util/thread_pool.h) under its old name.
#include "util/thread_pool.h"

namespace mha::cpu {
using ThreadPool = mha::ThreadPool;
}  // namespace mha::cpu
