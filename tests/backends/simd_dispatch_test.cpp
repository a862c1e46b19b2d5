// The one CPU probe and dispatch (src/vec/isa.h): whatever this machine
// has, a ByIsa table hands out only instances whose level the probe
// confirmed, the widest at the vector width asked for, and every kernel
// family the cpu backend and tt-sim run goes through it.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_flash_kernel.h"
#include "vec/isa.h"
#include "ttsim/simd/kernels.h"

namespace mha {
namespace {

using vec::Isa;

// Stand-in instances: the dispatch only compares and returns pointers.
int kA, kB, kC;

TEST(SimdDispatch, LevelsAreNestedAndNamed) {
  EXPECT_TRUE(vec::cpu_supports(Isa::Scalar));
  // A CPU that runs a level runs the narrower ones (isa_levels.def lists
  // each level's features as a superset of the one before).
  if (vec::cpu_supports(Isa::Avx512Vnni)) {
    EXPECT_TRUE(vec::cpu_supports(Isa::Avx512));
  }
  if (vec::cpu_supports(Isa::Avx512)) {
    EXPECT_TRUE(vec::cpu_supports(Isa::Avx2));
  }
  EXPECT_TRUE(vec::cpu_supports(vec::best_isa()));
  // The amx extension's kernels use AVX-512 beside the tiles (isa_levels.def).
  if (vec::cpu_has_amx()) {
    EXPECT_TRUE(vec::cpu_supports(Isa::Avx512));
  }
  EXPECT_EQ(std::string(vec::isa_name(Isa::Avx2)), "avx2");
  EXPECT_EQ(std::string(vec::isa_name(Isa::Avx512)), "avx512");
  EXPECT_EQ(std::string(vec::isa_name(Isa::Avx512Vnni)), "avx512vnni");
  EXPECT_EQ(vec::vector_bits(Isa::Avx512Vnni), vec::vector_bits(Isa::Avx512));
}

TEST(SimdDispatch, PicksTheWidestSupportedInstanceAtTheWidthAsked) {
  vec::ByIsa<const int*> f;
  f.at[static_cast<int>(Isa::Avx2)] = &kA;
  f.at[static_cast<int>(Isa::Avx512)] = &kB;
  f.at[static_cast<int>(Isa::Avx512Vnni)] = &kC;
  EXPECT_EQ(f.pick(Isa::Avx2), &kA);  // every machine mha runs on has AVX2
  EXPECT_EQ(f.pick(Isa::Scalar), nullptr);
  const bool avx512 = vec::cpu_supports(Isa::Avx512), vnni = vec::cpu_supports(Isa::Avx512Vnni);
  EXPECT_EQ(f.pick(Isa::Avx512), vnni ? &kC : avx512 ? &kB : nullptr);
  EXPECT_EQ(f.pick(Isa::Avx512Vnni), f.pick(Isa::Avx512));
  EXPECT_EQ(f.best(), vnni ? &kC : avx512 ? &kB : &kA);
  EXPECT_EQ(f.available().size(), 1u + avx512 + vnni);
  for (const int* p : f.available()) EXPECT_TRUE(vec::cpu_supports(f.isa_of(p)));
  EXPECT_EQ(f.isa_of(&kB), Isa::Avx512);
  EXPECT_EQ(f.isa_of(nullptr), Isa::Scalar);
  // A family without the VNNI level runs its AVX-512 instance at that width.
  f.at[static_cast<int>(Isa::Avx512Vnni)] = nullptr;
  EXPECT_EQ(f.pick(Isa::Avx512Vnni), avx512 ? &kB : nullptr);
}

TEST(SimdDispatch, EveryKernelFamilyRunsOnlyWhatTheProbeConfirms) {
  for (cpu::FlashKernel k : cpu::flash_kernels().available())
    EXPECT_TRUE(vec::cpu_supports(cpu::flash_kernels().isa_of(k)));
  for (cpu::DecodeKernel k : cpu::decode_kernels())
    EXPECT_TRUE(vec::cpu_supports(cpu::decode_kernel_set().isa_of(k)));
  EXPECT_EQ(std::string(cpu::decode_kernel_isa(cpu::decode_kernel())), vec::isa_name(vec::best_isa()));
  for (Isa isa : ttsim::simd::vector_isas()) {
    EXPECT_TRUE(vec::cpu_supports(isa));
    EXPECT_EQ(ttsim::simd::kernels_for(isa)->isa, isa);
  }
  EXPECT_EQ(cpu::flash_isa_available(Isa::Avx512), vec::cpu_supports(Isa::Avx512));
  EXPECT_EQ(ttsim::simd::kernels_for(Isa::Avx512) != nullptr, vec::cpu_supports(Isa::Avx512));
}

}  // namespace
}  // namespace mha
