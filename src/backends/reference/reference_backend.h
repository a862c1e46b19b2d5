#pragma once
#include "backends/backend.h"

namespace mha {

// float64 throughout, the plainest loops: the oracle for every other backend.
std::unique_ptr<Backend> make_reference_backend();

}  // namespace mha
