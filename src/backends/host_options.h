#pragma once
// The host settings every backend that computes on this machine takes
// (cpu, tt-sim), declared once: how many worker threads, and which
// instruction set its kernels use. Neither changes a result bit.
#include <string>

#include "util/error.h"
#include "util/fields.h"
#include "vec/isa.h"

namespace mha {

struct HostOptions {
  int threads = 0;                // 0: one per hardware thread
  std::string kernels = "auto";   // each backend maps the name onto its kernels

  template <class V>
  void fields(V& v) {
    v("threads", threads, "worker threads, 1 to 1024 (default: one per hardware thread)", fields::kNone,
      [](const fields::json& j, int& t, const std::string& where) {
        if (!j.is_number_integer() || j.get<int64_t>() < 1 || j.get<int64_t>() > 1024)
          throw InputError(where + ": expected an integer from 1 to 1024, found " + j.dump());
        t = static_cast<int>(j.get<int64_t>());
      });
    v("kernels", kernels, "the kernels' instruction set: \"auto\" (default), \"avx512\", \"avx2\" (tt-sim also "
      "\"scalar\", the lane models)");
  }

  // The vector width `kernels` names, as the level of that width this CPU
  // runs (each kernel family then runs its widest instance within it, e.g.
  // avx512's VNNI decode): "auto" the widest, "scalar" only where
  // `scalar_ok` (tt-sim's lane models). One table for every backend, so the
  // names and the messages cannot drift apart. Throws InputError naming
  // `where` + ".kernels": an unknown name, or a width this CPU lacks.
  vec::Isa isa(const std::string& where, bool scalar_ok) const;
};

}  // namespace mha
