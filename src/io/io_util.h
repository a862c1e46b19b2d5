#pragma once
// Private helpers shared by the tensor file readers and writers.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/read_file.h"
#include "util/text.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the readers copy little-endian file data straight into tensors");

namespace mha::io::detail {

// Names and paths can hold any byte (a zip member name, a JSON key); error
// messages must stay one printable line: see util/text.h.
using mha::printable;

// Throws InputError("WHERE: WHAT"); WHERE is already printable.
[[noreturn]] void fail(const std::string& where, const std::string& what);

// "FILE" for messages, escaped.
inline std::string where_file(const std::string& path) { return printable(path, 400); }
// "FILE: tensor 'NAME'" for messages, escaped.
inline std::string where_tensor(const std::string& path, std::string_view name) {
  return where_file(path) + ": tensor '" + printable(name) + "'";
}

// The whole file; InputError when it is missing, not a regular file (a
// folder, FIFO or device), or unreadable (util/read_file.h).
inline std::string read_file_bytes(const std::string& path) { return read_input_file(path); }

// "0x1f 0x8b ..." of the first bytes, for "found ..." in magic errors.
std::string hex_prefix(std::string_view bytes, std::size_t n = 8);

inline uint16_t le16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline uint32_t le32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t le64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
inline void put16(std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); }
inline void put32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
inline void put64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

inline const uint8_t* bytes_of(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace mha::io::detail
