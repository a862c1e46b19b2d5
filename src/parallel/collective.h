#pragma once
// The agreement every parallel mode runs its fallible steps under, so that
// a failure on one rank stops all ranks at the same point (no hang).
#include <exception>
#include <new>
#include <string>

#include "parallel/world.h"
#include "util/error.h"

namespace mha::parallel {

inline std::string error_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& x) {
    return x.what();
  }
}

// Runs `fn`; every rank learns whether it failed anywhere, and all throw the
// first failing rank's message together.
template <class F>
void collectively(F&& fn) {
  std::string err;
  try {
    fn();
  } catch (...) {
    err = error_of(std::current_exception());
    if (err.empty()) err = "unknown error";
  }
  const std::string agreed = agree(err);
  if (!agreed.empty()) throw InputError(agreed);
}

}  // namespace mha::parallel
