#pragma once
// A small zip reader and writer: enough for .npz as numpy.savez (stored) and
// numpy.savez_compressed (deflate) write it, zip64 extra fields included.
// The central directory is authoritative; every size, offset and CRC it
// states is checked against the archive before anything is allocated.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mha::io::detail {

struct ZipEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc = 0;
  uint64_t comp_size = 0;
  uint64_t uncomp_size = 0;
  uint64_t local_offset = 0;
  uint64_t data_offset = 0;  // after the local header; filled in by ZipReader
};

class ZipReader {
 public:
  // `where` names the archive in errors; `data` must outlive the reader.
  ZipReader(std::string_view data, std::string where);
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The member's uncompressed bytes, size and CRC-32 verified.
  std::string extract(const ZipEntry& e) const;
  // At most the first `max_bytes` uncompressed bytes (fewer when the member
  // or its data is shorter), unverified: lets a caller check a member's own
  // header before inflating all of it.
  std::string extract_prefix(const ZipEntry& e, std::size_t max_bytes) const;

 private:
  [[noreturn]] void fail_at(const std::string& what) const;
  void read_central_directory(uint64_t cd_offset, uint64_t cd_size, uint64_t count, uint64_t cd_limit);
  void locate_members();

  std::string_view data_;
  std::string where_;
  uint64_t cd_offset_ = 0;  // members must lie before the central directory
  std::vector<ZipEntry> entries_;
};

struct ZipMember {
  std::string name;
  std::string data;
};

// A whole archive; zip64 records are added only where sizes or offsets need them.
std::string write_zip(const std::vector<ZipMember>& members, bool deflate);

}  // namespace mha::io::detail
