#pragma once
// The cpu backend's KV-cache session (backends/decode.h).
#include <memory>

#include "backends/cpu/cpu_thread_pool.h"
#include "backends/decode.h"

namespace mha::cpu {

// The session runs on `pool`, which must outlive it (the backend's own).
std::unique_ptr<DecodeSession> make_cpu_decode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool);

}  // namespace mha::cpu
