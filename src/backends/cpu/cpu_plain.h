#pragma once
// The path taken when attention weights or stages are asked for: the full
// [B, H, L, S_total] matrices are the product, so they are formed with sgemm.
#include "backends/cpu/cpu_plan.h"

namespace mha::cpu {

AttentionResult run_plain(const AttentionSpec& spec, const AttentionInputs& in, const RunOptions& opt, Plan& plan,
                          ThreadPool& pool);

}  // namespace mha::cpu
