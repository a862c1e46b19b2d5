#include "backends/host_options.h"

#include "util/text.h"

namespace mha {

vec::Isa HostOptions::isa(const std::string& where, bool scalar_ok) const {
  const std::string key = where + ".kernels";
  vec::Isa want;
  if (kernels == "auto")
    return vec::cpu_supports(vec::Isa::Avx512) ? vec::Isa::Avx512 : vec::Isa::Avx2;
  if (kernels == "avx2")
    want = vec::Isa::Avx2;
  else if (kernels == "avx512")
    want = vec::Isa::Avx512;
  else if (kernels == "scalar" && scalar_ok)
    return vec::Isa::Scalar;
  else
    throw InputError(key + ": expected \"auto\", " + (scalar_ok ? "\"scalar\", " : "") +
                     "\"avx512\" or \"avx2\", found \"" + printable(kernels) + "\"");
  // The build's baseline is AVX2 + FMA (docs/BUILD.md), so only the wider
  // width can be missing; the features named are isa_levels.def's.
  if (!vec::cpu_supports(want))
    throw InputError(key + ": \"" + kernels + "\" asked for, but this CPU lacks AVX-512 (F, BW, CD, DQ, VL)");
  return want;
}

}  // namespace mha
