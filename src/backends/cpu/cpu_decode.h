#pragma once
// The cpu backend's KV-cache session (backends/decode.h).
#include <memory>

#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_thread_pool.h"
#include "backends/decode.h"

namespace mha::cpu {

// The session runs on `pool`, which must outlive it (the backend's own);
// isa forces the flash and decode kernels' instance (Auto: the widest).
std::unique_ptr<DecodeSession> make_cpu_decode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool,
                                               FlashIsa isa = FlashIsa::Auto);

}  // namespace mha::cpu
