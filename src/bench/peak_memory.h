#pragma once
// Peak resident memory of this process, resettable between bench rows
// (Linux: /proc/self/status VmHWM, reset through /proc/self/clear_refs).
namespace mha::bench {

void reset_peak_memory();
double peak_memory_mib();

}  // namespace mha::bench
