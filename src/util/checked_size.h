#pragma once
// Checked arithmetic for turning user-written numbers (config params, bench
// flags, header shapes) into element counts and byte sizes. Every product or
// sum that sizes an allocation goes through here, so an overflow or a size no
// machine could hold is one InputError naming the fields and the bytes,
// raised before anything is allocated (never a wrapped value, SIGFPE, or an
// allocation that runs until the kernel kills the process).
#include <cstdint>
#include <string>

namespace mha {

// a * b and a + b for non-negative a, b. `what` names the operands as the
// user wrote them, e.g. "params.num_attention_heads (4294967296) x
// params.head_dim (4294967296)"; on overflow: InputError("WHAT overflows 64-bit sizes").
int64_t checked_mul(int64_t a, int64_t b, const std::string& what);
int64_t checked_add(int64_t a, int64_t b, const std::string& what);

// "NAME (VALUE)" for `what` strings.
std::string field(const std::string& name, int64_t value);

// Physical memory of this machine in bytes (sysconf pages x page size), or
// INT64_MAX where the system does not say.
int64_t physical_memory_bytes();

// `elements` of `element_bytes` each, checked for overflow and against the
// machine's physical memory: InputError("WHAT: N bytes (E elements of B
// bytes) exceed this machine's M bytes of memory") otherwise. Returns the bytes.
int64_t check_bytes(int64_t elements, int64_t element_bytes, const std::string& what);
// The same for a total already in bytes.
int64_t check_fits_memory(int64_t bytes, const std::string& what);

}  // namespace mha
