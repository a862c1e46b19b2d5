#include "io/io_util.h"
#include "io/npy.h"
#include "io/tensor_file.h"
#include "io/zip.h"
#include "util/error.h"

namespace mha::io {

using namespace detail;

NamedTensors read_npz(const std::string& path) { return decode_npz(read_file_bytes(path), path); }

NamedTensors detail::decode_npz(std::string_view bytes, const std::string& path) {
  ZipReader zip(bytes, where_file(path));
  NamedTensors out;
  for (const ZipEntry& e : zip.entries()) {
    if (!e.name.empty() && e.name.back() == '/') continue;  // folder entries hold no data
    // numpy.load names members NAME.npy as NAME and keeps other names whole.
    std::string name = e.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    const std::string where = where_tensor(path, name);
    if (e.method != 0) {
      // A deflated member can inflate ~1000x; check its .npy header first,
      // inflating only as much as a header can take, and hold the size the
      // header implies to the member's stated size before inflating it all.
      const NpyLayout l = read_npy_layout(zip.extract_prefix(e, kNpyPreambleMax + kMaxNpyHeader), where);
      if (l.data_offset + l.nbytes != e.uncomp_size)
        fail(where, "member states " + std::to_string(e.uncomp_size) + " bytes uncompressed, but its .npy header (shape " +
                        shape_str(l.shape) + " of " + dtype_name(l.dtype) + ") needs " +
                        std::to_string(l.data_offset + l.nbytes));
    }
    std::string member = zip.extract(e);
    out.emplace_back(name, decode_npy(member, where));
  }
  return out;
}

// Stored members, as numpy.savez writes them: fastest to write and read back.
void write_npz(const std::string& path, const NamedTensors& tensors) {
  std::vector<ZipMember> members;
  members.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    for (const ZipMember& m : members)
      if (m.name == name + ".npy") throw InputError(where_file(path) + ": tensor name '" + printable(name) + "' appears twice");
    members.push_back({name + ".npy", encode_npy(t)});
  }
  write_file_atomic(path, write_zip(members, false));
}

}  // namespace mha::io
