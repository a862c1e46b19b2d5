#pragma once
// What every test that launches ranks needs: the mpirun prefix and a skip
// for builds without MPI.
#include <string>

#include "parallel/world.h"

namespace mha::test {

// Timeout first: a hang fails the test instead of the suite. Root (CI
// containers) needs OpenMPI's explicit consent. In the sanitizer build the
// ranks run without LeakSanitizer (ASan's other checks stay): OpenMPI's
// plugins leave allocations at exit from code dlclose()d by MPI_Finalize,
// frames no suppression can name.
inline std::string mpirun(int ranks) {
  return "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 "
         "mpirun -q --oversubscribe -np " +
         std::to_string(ranks) + " ";
}

}  // namespace mha::test

#define REQUIRE_MPI() \
  if (!::mha::parallel::mpi_built()) GTEST_SKIP() << "built without MPI"
