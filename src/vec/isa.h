#pragma once
// The one CPU-feature probe and the one kernel dispatch of mha's SIMD code
// (the cpu backend's flash and decode kernels, tt-sim's FPU lanes, the bench
// probes). A kernel family is compiled once per ISA level it has (a source
// file named *_<level>.cpp, built with that level's flags: isa_levels.def)
// and called through a ByIsa table, which only ever returns an instance
// whose level cpu_supports() confirmed.
#include <cstdint>
#include <vector>

namespace mha::vec {

// Scalar: no vector kernels (tt-sim's lane models). The others, narrowest
// first, are isa_levels.def's levels.
enum class Isa : uint8_t { Scalar, Avx2, Avx512, Avx512Vnni };
constexpr int kIsaCount = 4;

// "scalar", "avx2", "avx512", "avx512vnni".
const char* isa_name(Isa isa);
// Whether this CPU has every feature `isa`'s kernels are compiled for
// (isa_levels.def); Scalar always. Probed once per process.
bool cpu_supports(Isa isa);
// The widest level this CPU runs.
Isa best_isa();
// The vector width of a level in bits (0 for Scalar). The `kernels`
// options name a width: within it a family runs its widest instance the CPU
// supports (avx512 runs the VNNI decode kernel where the CPU has VNNI).
int vector_bits(Isa isa);

// Whether this CPU has AMX's tiles with bfloat16 dot products (amx_tile,
// amx_bf16) beside AVX-512 (isa_levels.def's amx extension) and the OS
// granted this process the tile state: the condition for calling code built
// from *_amx.cpp. Probed (and the grant asked for) once per process.
bool cpu_has_amx();

// One kernel family: its instance per level (nullptr where it has none).
// P is a function pointer or a pointer to a table of them.
template <class P>
struct ByIsa {
  P at[kIsaCount] = {};

  // The widest instance this CPU runs at `want`'s vector width, and its
  // level; nullptr (and Scalar) when there is none.
  Isa pick_isa(Isa want) const {
    Isa got = Isa::Scalar;
    for (int i = 1; i < kIsaCount; ++i) {
      const Isa l = static_cast<Isa>(i);
      if (at[i] && vector_bits(l) == vector_bits(want) && cpu_supports(l)) got = l;
    }
    return got;
  }
  P pick(Isa want) const { return at[static_cast<int>(pick_isa(want))]; }
  // The widest instance this CPU runs.
  P best() const { return at[static_cast<int>(pick_isa_any())]; }
  // Every instance this CPU runs, narrowest first (what tests compare).
  std::vector<P> available() const {
    std::vector<P> v;
    for (int i = 1; i < kIsaCount; ++i)
      if (at[i] && cpu_supports(static_cast<Isa>(i))) v.push_back(at[i]);
    return v;
  }
  // The level of an instance of this family (Scalar when it is none).
  Isa isa_of(P p) const {
    for (int i = 1; i < kIsaCount; ++i)
      if (p && at[i] == p) return static_cast<Isa>(i);
    return Isa::Scalar;
  }

 private:
  Isa pick_isa_any() const {
    Isa got = Isa::Scalar;
    for (int i = 1; i < kIsaCount; ++i)
      if (at[i] && cpu_supports(static_cast<Isa>(i))) got = static_cast<Isa>(i);
    return got;
  }
};

}  // namespace mha::vec
