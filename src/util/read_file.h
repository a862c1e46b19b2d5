#pragma once
// Reading a whole input file with a bound. A regular file is read whole (its
// size is on disk, so the allocation is not the file's to choose); a pipe or
// FIFO (e.g. bash's <(...)) is read up to a limit; devices, sockets and folders
// are refused, since /dev/zero or /dev/urandom would be read until memory ran out.
#include <cstdint>
#include <string>

namespace mha {

// Largest input read from a pipe or FIFO: 1 GiB.
constexpr uint64_t kMaxStreamBytes = uint64_t{1} << 30;

// The file's bytes; InputError naming the (escaped) path when it is missing,
// a folder, a device, unreadable, or a pipe longer than `max_stream_bytes`.
std::string read_input_file(const std::string& path, uint64_t max_stream_bytes = kMaxStreamBytes);

}  // namespace mha
