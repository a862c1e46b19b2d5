#pragma once
// The cpu backend's KV-cache session (backends/decode.h).
#include <memory>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_decode_tuning.h"
#include "backends/cpu/cpu_flash.h"
#include "backends/cpu/cpu_projection.h"
#include "backends/cpu/cpu_thread_pool.h"
#include "backends/decode.h"

namespace mha::cpu {

// The session runs on `pool`, which must outlive it (the backend's own);
// isa forces the flash and decode kernels' instance (Auto: the widest).
// tuner (which must outlive the session) chooses the decode kernel's
// tunables on the first one-row append (cpu_decode_tuning.h); nullptr: the
// kernel's defaults.
std::unique_ptr<DecodeSession> make_cpu_decode(const AttentionSpec& spec, const DecodeOptions& opt, ThreadPool& pool,
                                               vec::Isa isa = vec::best_isa(), DecodeTuner* tuner = nullptr);
// y [rows, lin.out] = x [rows, lin.in] . w^T + b: one row as a GEMV split
// over output columns across the pool (it streams the weights once), more
// rows as the pool's sgemm.
void decode_project_rows(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t rows, float* y);

// The decode chunk kernel a session with `isa` runs: AVX2 when forced, else
// the widest this CPU has (AVX-512 forced as for flash).
DecodeKernel decode_kernel_for(vec::Isa isa);

}  // namespace mha::cpu
