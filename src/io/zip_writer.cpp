#include <zlib.h>

#include <algorithm>
#include <climits>

#include "io/io_util.h"
#include "io/zip.h"
#include "util/error.h"

namespace mha::io::detail {
namespace {

constexpr uint64_t kMax32 = 0xffffffff;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: fixed, so output is reproducible

std::string deflate_raw(const std::string& in) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&zs, static_cast<uLong>(std::min<uint64_t>(in.size(), ULONG_MAX))) + 64, '\0');
  uint64_t in_left = in.size();
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, UINT_MAX));
    zs.avail_in = in_chunk;
    zs.next_out = reinterpret_cast<Bytef*>(out.data()) + zs.total_out;
    zs.avail_out = static_cast<uInt>(std::min<uint64_t>(out.size() - zs.total_out, UINT_MAX));
    ret = deflate(&zs, in_left == in_chunk ? Z_FINISH : Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    if (ret == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      throw std::runtime_error("deflate failed");
    }
  }
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

uint32_t sat32(uint64_t v) { return v >= kMax32 ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(v); }

}  // namespace

std::string write_zip(const std::vector<ZipMember>& members, bool deflate) {
  std::string out, central;
  for (const ZipMember& m : members) {
    if (m.name.size() > 0xffff) throw InputError("zip member name is longer than 65535 bytes");
    const uint32_t crc = static_cast<uint32_t>(crc32_z(0, bytes_of(m.data), m.data.size()));
    std::string packed = deflate ? deflate_raw(m.data) : std::string();
    const std::string& body = deflate ? packed : m.data;
    const uint64_t usize = m.data.size(), csize = body.size(), offset = out.size();
    const bool big = usize >= kMax32 || csize >= kMax32;
    const bool utf8 = std::any_of(m.name.begin(), m.name.end(), [](char c) { return c & 0x80; });
    const uint16_t flags = utf8 ? 0x0800 : 0, method = deflate ? 8 : 0, version = big || offset >= kMax32 ? 45 : 20;

    std::string local_extra;
    if (big) {  // a zip64 local header carries both sizes
      put16(local_extra, 1);
      put16(local_extra, 16);
      put64(local_extra, usize);
      put64(local_extra, csize);
    }
    put32(out, 0x04034b50);
    for (uint16_t v : {version, flags, method, uint16_t{0}, kDosDate1980}) put16(out, v);
    put32(out, crc);
    put32(out, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(csize));
    put32(out, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(usize));
    put16(out, static_cast<uint16_t>(m.name.size()));
    put16(out, static_cast<uint16_t>(local_extra.size()));
    out += m.name;
    out += local_extra;
    out += body;

    std::string extra, fields;
    for (uint64_t v : {usize, csize, offset})
      if (v >= kMax32) put64(fields, v);
    if (!fields.empty()) {
      put16(extra, 1);
      put16(extra, static_cast<uint16_t>(fields.size()));
      extra += fields;
    }
    put32(central, 0x02014b50);
    for (uint16_t v : {uint16_t(3 << 8 | version), version, flags, method, uint16_t{0}, kDosDate1980}) put16(central, v);
    put32(central, crc);
    put32(central, sat32(csize));
    put32(central, sat32(usize));
    put16(central, static_cast<uint16_t>(m.name.size()));
    put16(central, static_cast<uint16_t>(extra.size()));
    for (int i = 0; i < 3; ++i) put16(central, 0);  // comment length, start disk, internal attributes
    put32(central, 0100644u << 16);                   // external attributes: a regular file, rw-r--r--
    put32(central, sat32(offset));
    central += m.name;
    central += extra;
  }
  const uint64_t cd_offset = out.size(), cd_size = central.size(), count = members.size();
  out += central;
  if (count >= 0xffff || cd_offset >= kMax32 || cd_size >= kMax32) {
    const uint64_t rec = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, count);
    put64(out, count);
    put64(out, cd_size);
    put64(out, cd_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, rec);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint16_t>(std::min<uint64_t>(count, 0xffff)));
  put16(out, static_cast<uint16_t>(std::min<uint64_t>(count, 0xffff)));
  put32(out, sat32(cd_size));
  put32(out, sat32(cd_offset));
  put16(out, 0);
  return out;
}

}  // namespace mha::io::detail
