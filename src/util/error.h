#pragma once
// Errors that mha reports to the user.
//
// InputError means "the user's input is wrong" (a file, a config, a flag):
// the CLI prints what() as one line and exits with code 2. Its message must
// say what is wrong, where (file, tensor or JSON path) and expected vs found.
// Anything else that escapes is a bug in mha.
#include <stdexcept>
#include <string>

namespace mha {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
};

// Out of device memory in tt-sim; reported like InputError (exit code 2).
class DeviceOutOfMemory : public InputError {
 public:
  explicit DeviceOutOfMemory(const std::string& msg) : InputError(msg) {}
};

}  // namespace mha
