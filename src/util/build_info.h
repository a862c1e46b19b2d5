#pragma once
// What a measurement says about where it ran (`mha bench` rows, the cpu
// decode calibration's key): the build's git
// commit, the CPU model and the time, so rows from different machines and
// builds can be told apart once collected.
#include <string>

namespace mha {

// `git describe --always --dirty` of the source tree when CMake configured
// the build ("unknown" outside a git checkout or without git). A commit made
// after configuring shows only after the next configure.
const char* build_commit();
// /proc/cpuinfo's first "model name" ("unknown" where there is none).
std::string cpu_model();
// Now, UTC, ISO 8601 to the second: "2026-11-22T23:45:01Z".
std::string utc_timestamp();
// What a stored measurement of this machine holds for (util/user_cache.h's
// keys): "cpu=MODEL;isa=ISA;threads=N;build=COMMIT". A measurement taken on
// another CPU model, instruction set, thread count or build is not reused.
std::string machine_key(const std::string& isa, int threads);

}  // namespace mha
