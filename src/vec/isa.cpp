#include "vec/isa.h"

#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace mha::vec {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
#define MHA_ISA_LEVEL(level, name, features) \
  case Isa::level: return #name;
#include "vec/isa_levels.def"
#undef MHA_ISA_LEVEL
  }
  return "?";
}

int vector_bits(Isa isa) { return isa == Isa::Scalar ? 0 : isa == Isa::Avx2 ? 256 : 512; }

namespace {

// One test per feature isa_levels.def names (a feature added there without
// one here fails to compile). GCC's __builtin_cpu_supports knows them all;
// clang 14's (the sanitizer and fuzz builds) lacks f16c, which CPUID leaf 1
// reports in ECX bit 29.
#define MHA_BUILTIN_FEATURE(f) \
  bool feature_##f() { return __builtin_cpu_supports(#f); }
MHA_BUILTIN_FEATURE(avx2)
MHA_BUILTIN_FEATURE(fma)
MHA_BUILTIN_FEATURE(avx512f)
MHA_BUILTIN_FEATURE(avx512bw)
MHA_BUILTIN_FEATURE(avx512cd)
MHA_BUILTIN_FEATURE(avx512dq)
MHA_BUILTIN_FEATURE(avx512vl)
MHA_BUILTIN_FEATURE(avx512vnni)
#undef MHA_BUILTIN_FEATURE
bool feature_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
// CPUID leaf 7's EDX (neither compiler's builtin knows AMX in all the
// versions mha builds with).
bool leaf7_edx_bit(int bit) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> bit) & 1u) != 0;
}
bool feature_amx_tile() { return leaf7_edx_bit(24); }
bool feature_amx_bf16() { return leaf7_edx_bit(22); }

// Linux hands out AMX's 8 KB of tile data only to a process that asked
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a kernel without
// the call, or one that refuses, leaves AMX unusable.
bool os_grants_tiles() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

struct Support {
  bool at[kIsaCount] = {true};
  bool amx = false;
  Support() {
    __builtin_cpu_init();
#define MHA_FEATURE(f) &&feature_##f()
#define MHA_ISA_LEVEL(level, name, features) at[static_cast<int>(Isa::level)] = true features;
#define MHA_ISA_EXTENSION(ext, name, features) bool has_##name = true features;
#include "vec/isa_levels.def"
#undef MHA_ISA_LEVEL
#undef MHA_FEATURE
    amx = has_amx && os_grants_tiles();
  }
};

const Support& support() {
  static const Support s;
  return s;
}

}  // namespace

bool cpu_supports(Isa isa) { return support().at[static_cast<int>(isa)]; }

bool cpu_has_amx() { return support().amx; }

Isa best_isa() {
  Isa best = Isa::Scalar;
  for (int i = 1; i < kIsaCount; ++i)
    if (cpu_supports(static_cast<Isa>(i))) best = static_cast<Isa>(i);
  return best;
}

}  // namespace mha::vec
