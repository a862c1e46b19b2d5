// The AVX-512 decode chunk kernel again with AVX512_VNNI (built at the
// avx512vnni level, src/vec/isa_levels.def): the q8_0 / q4_0 integer K scores
// take vpdpbusd. decode_kernel() calls it only after checking the CPU.
#define MHA_DECODE_VNNI 1
#define MHA_DECODE_NS decode_avx512vnni
#include "cpu_decode_avx512.cpp"
