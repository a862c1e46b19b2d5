#pragma once
// The cpu backend's KV-cache session (backends/decode.h).
#include <memory>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_thread_pool.h"
#include "backends/decode.h"

namespace mha::cpu {

// The session runs on `pool`, which must outlive it (the backend's own), and
// attends cached rows with `kernel` (decode_kernel(): the widest the CPU has).
std::unique_ptr<DecodeSession> make_cpu_decode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool,
                                               DecodeKernel kernel = decode_kernel());

}  // namespace mha::cpu
