#include "vec/isa.h"

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

struct Support {
  bool at[kIsaCount] = {true};
  Support() {
    __builtin_cpu_init();
#define MHA_FEATURE(f) &&__builtin_cpu_supports(#f)
#define MHA_ISA_LEVEL(level, name, features) at[static_cast<int>(Isa::level)] = true features;
#include "vec/isa_levels.def"
#undef MHA_ISA_LEVEL
#undef MHA_FEATURE
  }
};

}  // namespace

bool cpu_supports(Isa isa) {
  static const Support s;
  return s.at[static_cast<int>(isa)];
}

Isa best_isa() {
  Isa best = Isa::Scalar;
  for (int i = 1; i < kIsaCount; ++i)
    if (cpu_supports(static_cast<Isa>(i))) best = static_cast<Isa>(i);
  return best;
}

}  // namespace mha::vec
