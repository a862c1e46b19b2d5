#pragma once
// The O(s*d)-memory path: projections, flash attention, output projection.
#include "backends/cpu/cpu_plan.h"

namespace mha::cpu {

// isa: the flash kernel instance (FlashIsa::Auto: the widest this CPU runs).
AttentionResult run_flash(const AttentionSpec& spec, const AttentionInputs& in, Plan& plan, ThreadPool& pool,
                          FlashIsa isa = FlashIsa::Auto);

}  // namespace mha::cpu
