#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <set>

#include "io/io_util.h"
#include "io/zip.h"

namespace mha::io::detail {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr std::size_t kEndLen = 22, kCentralLen = 46, kLocalLen = 30, kLocator64Len = 20, kEnd64Len = 56;
// Deflate cannot expand data by more than about 1032:1; a member claiming a
// larger ratio lies, and is refused before its output buffer is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

void ZipReader::fail_at(const std::string& what) const { fail(where_, what); }

ZipReader::ZipReader(std::string_view data, std::string where) : data_(data), where_(std::move(where)) {
  const uint8_t* p = bytes_of(data_);
  const std::size_t n = data_.size();
  if (n < kEndLen) fail_at("not a zip archive: " + std::to_string(n) + " bytes, expected at least 22");
  // The end record sits at the end, followed only by its comment.
  std::size_t end = std::string::npos;
  std::size_t lowest = n - kEndLen > 0xffff ? n - kEndLen - 0xffff : 0;
  for (std::size_t pos = n - kEndLen + 1; pos-- > lowest;) {
    if (le32(p + pos) == kEndSig && pos + kEndLen + le16(p + pos + 20) == n) {
      end = pos;
      break;
    }
  }
  if (end == std::string::npos)
    fail_at("not a zip archive: no end of central directory record (truncated or not an .npz file?)");
  const uint8_t* e = p + end;
  if (le16(e + 4) != 0 || le16(e + 6) != 0) fail_at("multi-disk zip archives are not supported");
  uint64_t count = le16(e + 10), cd_size = le32(e + 12), cd_offset = le32(e + 16);
  if (le16(e + 8) != le16(e + 10))
    fail_at("end record counts " + std::to_string(le16(e + 8)) + " entries on this disk but " +
            std::to_string(count) + " in total");
  uint64_t cd_limit = end;
  if (end >= kLocator64Len && le32(p + end - kLocator64Len) == kLocator64Sig) {
    const uint8_t* loc = p + end - kLocator64Len;
    uint64_t rec = le64(loc + 8);
    if (rec > end - kLocator64Len || end - kLocator64Len - rec < kEnd64Len)
      fail_at("zip64 end record offset " + std::to_string(rec) + " is outside the archive");
    const uint8_t* r = p + rec;
    if (le32(r) != kEnd64Sig) fail_at("zip64 end record has a bad signature: found " + hex32(le32(r)));
    if (le32(r + 16) != 0 || le32(r + 20) != 0) fail_at("multi-disk zip archives are not supported");
    count = le64(r + 32);
    cd_size = le64(r + 40);
    cd_offset = le64(r + 48);
    cd_limit = rec;
  } else if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    fail_at("end record needs a zip64 end record, which is missing");
  }
  read_central_directory(cd_offset, cd_size, count, cd_limit);
  locate_members();
}

void ZipReader::read_central_directory(uint64_t cd_offset, uint64_t cd_size, uint64_t count, uint64_t cd_limit) {
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset)
    fail_at("central directory [" + std::to_string(cd_offset) + ", +" + std::to_string(cd_size) +
            ") runs past its end record at byte " + std::to_string(cd_limit));
  if (count > cd_size / kCentralLen)
    fail_at("central directory claims " + std::to_string(count) + " entries but holds only " +
            std::to_string(cd_size) + " bytes");
  cd_offset_ = cd_offset;
  const uint8_t* p = bytes_of(data_);
  uint64_t pos = cd_offset, cd_end = cd_offset + cd_size;
  std::set<std::string> seen;
  entries_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const std::string at = "central directory entry " + std::to_string(i);
    if (cd_end - pos < kCentralLen) fail_at(at + " is truncated");
    const uint8_t* c = p + pos;
    if (le32(c) != kCentralSig) fail_at(at + " has a bad signature: found " + hex32(le32(c)));
    ZipEntry z;
    z.flags = le16(c + 8);
    z.method = le16(c + 10);
    z.crc = le32(c + 16);
    z.comp_size = le32(c + 20);
    z.uncomp_size = le32(c + 24);
    const std::size_t name_len = le16(c + 28), extra_len = le16(c + 30), comment_len = le16(c + 32);
    z.local_offset = le32(c + 42);
    if (cd_end - pos - kCentralLen < name_len + extra_len + comment_len) fail_at(at + " is truncated");
    z.name.assign(reinterpret_cast<const char*>(c + kCentralLen), name_len);
    const std::string member = "member '" + printable(z.name) + "'";
    // The zip64 extra field holds, in this order, only the values whose
    // 32-bit fields are saturated.
    const uint8_t* x = c + kCentralLen + name_len;
    const uint8_t* xend = x + extra_len;
    while (xend - x >= 4) {
      uint16_t id = le16(x), sz = le16(x + 2);
      if (static_cast<std::size_t>(xend - x - 4) < sz) fail_at(member + ": extra field runs past its entry");
      if (id == 0x0001) {
        const uint8_t* f = x + 4;
        const uint8_t* fend = f + sz;
        for (uint64_t* v : {&z.uncomp_size, &z.comp_size, &z.local_offset}) {
          if (*v != 0xffffffff) continue;
          if (fend - f < 8) fail_at(member + ": zip64 extra field is too short");
          *v = le64(f);
          f += 8;
        }
      }
      x += 4 + sz;
    }
    if (z.flags & 1) fail_at(member + ": encrypted members are not supported");
    if (z.method != 0 && z.method != 8)
      fail_at(member + ": unsupported compression method " + std::to_string(z.method) +
              ", expected 0 (stored) or 8 (deflate)");
    // Checked here, before any member is read, so no caller inflates (even a
    // prefix of) a member whose stated size is impossible.
    if (z.method == 8 && z.uncomp_size / kMaxDeflateRatio > z.comp_size + 1)
      fail_at(member + ": claims to inflate " + std::to_string(z.comp_size) + " bytes to " +
              std::to_string(z.uncomp_size) + ", more than deflate can produce");
    if (!seen.insert(z.name).second) fail_at(member + " appears twice");
    pos += kCentralLen + name_len + extra_len + comment_len;
    entries_.push_back(std::move(z));
  }
  if (pos != cd_end)
    fail_at("central directory holds " + std::to_string(pos - cd_offset) + " bytes of entries, expected " +
            std::to_string(cd_size));
}

void ZipReader::locate_members() {
  const uint8_t* p = bytes_of(data_);
  for (ZipEntry& z : entries_) {
    const std::string member = "member '" + printable(z.name) + "'";
    if (z.local_offset > cd_offset_ || cd_offset_ - z.local_offset < kLocalLen)
      fail_at(member + ": local header offset " + std::to_string(z.local_offset) + " is outside the member area");
    const uint8_t* l = p + z.local_offset;
    if (le32(l) != kLocalSig) fail_at(member + ": local header has a bad signature: found " + hex32(le32(l)));
    const uint64_t name_len = le16(l + 26), extra_len = le16(l + 28);
    const uint64_t start = z.local_offset + kLocalLen + name_len + extra_len;
    if (start > cd_offset_ || z.comp_size > cd_offset_ - start)
      fail_at(member + ": " + std::to_string(z.comp_size) + " bytes of data at offset " + std::to_string(start) +
              " run past the member area, which ends at byte " + std::to_string(cd_offset_));
    if (std::string_view(reinterpret_cast<const char*>(l + kLocalLen), name_len) != z.name)
      fail_at(member + ": local header names a different member");
    z.data_offset = start;
  }
  // Members sharing bytes are how zip bombs multiply their output; numpy never
  // writes them.
  std::vector<const ZipEntry*> order;
  for (const ZipEntry& z : entries_) order.push_back(&z);
  std::sort(order.begin(), order.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->local_offset < b->local_offset; });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i]->local_offset < order[i - 1]->data_offset + order[i - 1]->comp_size)
      fail_at("member '" + printable(order[i]->name) + "' overlaps member '" + printable(order[i - 1]->name) + "'");
}

std::string ZipReader::extract_prefix(const ZipEntry& z, std::size_t max_bytes) const {
  const std::string member = "member '" + printable(z.name) + "'";
  const uint8_t* src = bytes_of(data_) + z.data_offset;
  const uint64_t want = std::min<uint64_t>(max_bytes, z.uncomp_size);
  if (z.method == 0) return std::string(reinterpret_cast<const char*>(src), std::min<uint64_t>(want, z.comp_size));
  std::string out(want, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail_at(member + ": cannot start inflate");
  // max_bytes is small (a .npy header), so one call with 32-bit counts does.
  zs.next_in = const_cast<Bytef*>(src);
  zs.avail_in = static_cast<uInt>(std::min<uint64_t>(z.comp_size, UINT_MAX));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(want);
  int ret = Z_OK;
  while (ret == Z_OK && zs.avail_out > 0) {
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    ret = inflate(&zs, Z_NO_FLUSH);
    if (ret == Z_OK && zs.avail_in == in_before && zs.avail_out == out_before) break;
  }
  std::string msg = zs.msg ? zs.msg : "";
  out.resize(want - zs.avail_out);
  inflateEnd(&zs);
  if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT || ret == Z_MEM_ERROR)
    fail_at(member + ": corrupt deflate data (" + printable(msg) + ")");
  return out;
}

std::string ZipReader::extract(const ZipEntry& z) const {
  const std::string member = "member '" + printable(z.name) + "'";
  const uint8_t* src = bytes_of(data_) + z.data_offset;
  std::string out;
  if (z.method == 0) {
    if (z.comp_size != z.uncomp_size)
      fail_at(member + ": stored member has compressed size " + std::to_string(z.comp_size) +
              " but uncompressed size " + std::to_string(z.uncomp_size));
    out.assign(reinterpret_cast<const char*>(src), z.comp_size);
  } else {
    out.resize(z.uncomp_size);
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail_at(member + ": cannot start inflate");
    uint64_t in_left = z.comp_size, out_left = z.uncomp_size;
    zs.next_in = const_cast<Bytef*>(src);
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    int ret = Z_OK;
    // zlib counts in 32-bit units, so large members go through in chunks.
    while (ret == Z_OK) {
      uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, UINT_MAX));
      uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out_left, UINT_MAX));
      zs.avail_in = in_chunk;
      zs.avail_out = out_chunk;
      ret = inflate(&zs, Z_NO_FLUSH);
      in_left -= in_chunk - zs.avail_in;
      out_left -= out_chunk - zs.avail_out;
      if (ret == Z_OK && in_chunk == zs.avail_in && out_chunk == zs.avail_out) ret = Z_BUF_ERROR;
    }
    std::string msg = zs.msg ? zs.msg : "";
    inflateEnd(&zs);
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT)
      fail_at(member + ": corrupt deflate data (" + printable(msg) + ")");
    if (ret != Z_STREAM_END && out_left == 0)
      fail_at(member + ": inflates to more than its stated size of " + std::to_string(z.uncomp_size) + " bytes");
    if (ret != Z_STREAM_END)
      fail_at(member + ": deflate data is truncated: " + std::to_string(z.uncomp_size - out_left) + " of " +
              std::to_string(z.uncomp_size) + " bytes inflated");
    if (out_left != 0)
      fail_at(member + ": inflates to " + std::to_string(z.uncomp_size - out_left) + " bytes, expected " +
              std::to_string(z.uncomp_size));
  }
  uint32_t crc = static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(out.data()), out.size()));
  if (crc != z.crc) fail_at(member + ": CRC-32 mismatch: expected " + hex32(z.crc) + ", found " + hex32(crc));
  return out;
}

}  // namespace mha::io::detail
