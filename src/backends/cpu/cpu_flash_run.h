#pragma once
// The O(s*d)-memory path: projections, flash attention, output projection.
#include "backends/cpu/cpu_plan.h"

namespace mha::cpu {

AttentionResult run_flash(const AttentionSpec& spec, const AttentionInputs& in, Plan& plan, ThreadPool& pool);

}  // namespace mha::cpu
