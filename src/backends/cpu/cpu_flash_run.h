#pragma once
// The O(s*d)-memory path: projections, flash attention, output projection.
#include "backends/cpu/cpu_plan.h"

namespace mha::cpu {

// isa: the flash kernel instance (the widest this CPU runs at its width).
AttentionResult run_flash(const AttentionSpec& spec, const AttentionInputs& in, Plan& plan, ThreadPool& pool,
                          vec::Isa isa = vec::best_isa());

}  // namespace mha::cpu
