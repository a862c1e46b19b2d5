#pragma once
// Opening and reading input files. Every path mha reads (configs, weights,
// checkpoint shards and indexes, inputs, references, bench suites) must be a
// regular file once symlinks are followed (Hugging Face's cache links
// snapshots/<rev>/*.safetensors into blobs/, so links are followed, but what
// they name must be a file). FIFOs, devices, sockets and folders are refused
// without blocking and without reading a byte: a FIFO would block the open
// (or be fed forever), /dev/zero would be read until memory ran out.
#include <cstdint>
#include <string>

namespace mha {

// A read-only descriptor of `path` (the caller closes it), with the file's
// size in *size. The path is stat'ed first, so a FIFO or device is never
// opened; it is then opened with O_NONBLOCK and checked again on the
// descriptor (the path may have been replaced between the two), and blocking
// reads restored. InputError naming the (escaped) path otherwise.
int open_regular_file(const std::string& path, uint64_t* size);

// The file's bytes; InputError naming the path when it is missing, not a
// regular file, or unreadable.
std::string read_input_file(const std::string& path);

}  // namespace mha
