#pragma once
// Peak resident memory of one bench row (Linux: /proc/self/status VmHWM,
// reset through /proc/self/clear_refs before the row).
namespace mha::bench {

// Resets the peak to the current resident size by writing "5" to
// /proc/self/clear_refs. False where that is not permitted (no /proc, a
// kernel or sandbox refusing the write): the peak read afterwards is then the
// process's high-water mark since it started, and rows say so.
bool reset_peak_memory();
// VmHWM in MiB (0 where /proc/self/status has none).
double peak_memory_mib();

}  // namespace mha::bench
