#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "io/tensor_file.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace mha::io {

using namespace detail;

namespace {

// The limit the reference implementation (huggingface safetensors) enforces.
constexpr uint64_t kMaxHeader = 100'000'000;

struct StDtype {
  const char* name;
  DType dtype;
  int rank;  // the reference's Dtype enum order, which its writer sorts by
};
const StDtype kDtypes[] = {
    {"BOOL", DType::Bool, 0}, {"U8", DType::U8, 1},   {"I8", DType::I8, 2},    {"I16", DType::I16, 5},
    {"U16", DType::U16, 6},   {"F16", DType::F16, 7}, {"BF16", DType::BF16, 8}, {"I32", DType::I32, 9},
    {"U32", DType::U32, 10},  {"F32", DType::F32, 11}, {"F64", DType::F64, 12}, {"I64", DType::I64, 13},
    {"U64", DType::U64, 14},
};

const StDtype& st_dtype(DType t) {
  for (const StDtype& d : kDtypes)
    if (d.dtype == t) return d;
  return kDtypes[0];
}

struct Info {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Info parse_info(const std::string& name, const nlohmann::json& v, const std::string& path) {
  const std::string where = where_tensor(path, name);
  if (!v.is_object()) fail(where, "header entry is not a JSON object");
  Info info{name, DType::F32, {}, 0, 0};
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail(where, "header entry has no string \"dtype\"");
  const std::string s = dt->get<std::string>();
  auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const StDtype& d) { return s == d.name; });
  if (known == std::end(kDtypes))
    fail(where, "unsupported dtype \"" + printable(s) + "\": expected BOOL, U8..U64, I8..I64, F16, BF16, F32 or F64");
  info.dtype = known->dtype;
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail(where, "header entry has no \"shape\" array");
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(where, "\"shape\" holds " + printable(d.dump()) + ", expected a non-negative integer");
    info.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    fail(where, "header entry needs \"data_offsets\": [BEGIN, END] of non-negative integers");
  info.begin = (*off)[0].get<uint64_t>();
  info.end = (*off)[1].get<uint64_t>();
  return info;
}

std::vector<Info> parse_header(std::string_view header, const std::string& path) {
  const std::string where = where_file(path);
  if (header.empty() || header[0] != '{')
    fail(where, "header does not start with '{': found " + hex_prefix(header, 4));
  if (std::size_t at = json_too_deep_at(header); at != std::string_view::npos)
    fail(where, "header JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels at header byte " +
                    std::to_string(at));
  // Each entry is turned into an Info as soon as it is parsed and then
  // dropped from the tree (the callback returns false), so a header of 1e5
  // tensors never exists as 1e5 JSON objects at once (about 80 MB).
  std::vector<Info> infos;
  std::unordered_set<std::string> seen;
  std::string key;
  auto entry = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
    using E = nlohmann::json::parse_event_t;
    if (depth != 1) return true;
    if (ev == E::key) {
      key = v.get<std::string>();
      return true;
    }
    if (ev != E::object_end && ev != E::array_end && ev != E::value) return true;
    if (key == "__metadata__") {
      if (!v.is_object()) fail(where, "\"__metadata__\" is not a JSON object");
      for (const auto& [mk, mv] : v.items())
        if (!mv.is_string()) fail(where, "\"__metadata__\" value for \"" + printable(mk) + "\" is not a string");
    } else {
      if (!seen.insert(key).second) fail(where_tensor(path, key), "appears twice in the header");
      infos.push_back(parse_info(key, v, path));
    }
    return false;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header.begin(), header.end(), entry);
  } catch (const nlohmann::json::exception& e) {
    fail(where, "header is not valid JSON: " + printable(e.what()));
  }
  if (!j.is_object()) fail(where, "header is not a JSON object");
  return infos;
}

// In offset order, tensors must tile the data buffer of `buffer` bytes exactly, each
// holding numel * dtype size bytes, as the reference implementation checks.
std::vector<Info> check_layout(std::vector<Info> infos, uint64_t buffer, const std::string& path) {
  std::sort(infos.begin(), infos.end(), [](const Info& a, const Info& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t pos = 0;
  for (const Info& info : infos) {
    const std::string tw = where_tensor(path, info.name);
    const std::string range = "data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) + "]";
    if (info.end < info.begin) fail(tw, range + " end before they begin");
    if (info.begin < pos) fail(tw, range + " overlap the previous tensor, which ends at " + std::to_string(pos));
    if (info.begin > pos) fail(tw, range + " leave a gap: expected the tensor to begin at " + std::to_string(pos));
    int64_t numel;
    try {
      numel = shape_numel(info.shape);
    } catch (const InputError& e) {
      fail(tw, e.what());
    }
    const uint64_t es = dtype_size(info.dtype);
    if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / es)
      fail(tw, "shape " + shape_str(info.shape) + " needs more bytes than fit in 64 bits");
    const uint64_t need = static_cast<uint64_t>(numel) * es;
    if (info.end - info.begin != need)
      fail(tw, range + " hold " + std::to_string(info.end - info.begin) + " bytes, expected " + std::to_string(need) +
                   " for shape " + shape_str(info.shape) + " of " + st_dtype(info.dtype).name);
    pos = info.end;
    if (pos > buffer)
      fail(tw, range + " run past the end of the data buffer of " + std::to_string(buffer) + " bytes");
  }
  if (pos != buffer)
    fail(where_file(path), "tensors cover " + std::to_string(pos) + " bytes of the data buffer, expected all " +
                               std::to_string(buffer) + " bytes");
  return infos;
}

// The header length field, checked against the file size (8 + header + data).
uint64_t header_length(const uint8_t* first8, uint64_t file_size, const std::string& path) {
  const std::string where = where_file(path);
  if (file_size < 8)
    fail(where, "file is " + std::to_string(file_size) + " bytes, expected at least 8 (the header length)");
  const uint64_t n = le64(first8);
  if (n > kMaxHeader)
    fail(where, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeader) + " bytes");
  if (n > file_size - 8)
    fail(where, "header length " + std::to_string(n) + " runs past the end of the file: " +
                    std::to_string(file_size - 8) + " bytes follow the length field");
  return n;
}

// Any nonzero byte is true, as the reference reads BOOL.
void normalize_bool(Tensor& t) {
  if (t.dtype() == DType::Bool)
    for (std::size_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = t.raw()[i] != 0;
}

Tensor tensor_from(const Info& info, const uint8_t* bytes) {
  Tensor t(info.dtype, info.shape);
  if (t.nbytes()) std::memcpy(t.raw(), bytes, t.nbytes());
  normalize_bool(t);
  return t;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path) { return detail::decode_safetensors(read_file_bytes(path), path); }

NamedTensors detail::decode_safetensors(std::string_view bytes, const std::string& path) {
  const uint8_t zero8[8] = {};
  const uint64_t n = header_length(bytes.size() >= 8 ? bytes_of(bytes) : zero8, bytes.size(), path);
  std::vector<Info> infos = check_layout(parse_header(bytes.substr(8, n), path), bytes.size() - 8 - n, path);
  NamedTensors out;
  out.reserve(infos.size());
  const uint8_t* data = bytes_of(bytes) + 8 + n;
  for (const Info& info : infos) out.emplace_back(info.name, tensor_from(info, data + info.begin));
  return out;
}

struct SafetensorsReader::Impl {
  std::string path;
  std::unique_ptr<FILE, int (*)(FILE*)> file{nullptr, &std::fclose};
  uint64_t data_start = 0;
  std::vector<Info> infos;                            // in data order
  std::unordered_map<std::string, std::size_t> index;  // name -> position in infos
};

SafetensorsReader::SafetensorsReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  const std::string where = where_file(path);
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);  // refuses FIFOs and devices without blocking
  m.file.reset(::fdopen(fd, "rb"));
  if (!m.file) {
    ::close(fd);
    fail(where, std::string("cannot open: ") + std::strerror(errno));
  }
  uint8_t first8[8] = {};
  if (size >= 8 && std::fread(first8, 1, 8, m.file.get()) != 8) fail(where, "read error in the header length");
  const uint64_t n = header_length(first8, size, path);
  std::string header(n, '\0');
  if (n && std::fread(header.data(), 1, n, m.file.get()) != n) fail(where, "read error in the header");
  m.infos = check_layout(parse_header(header, path), size - 8 - n, path);
  m.data_start = 8 + n;
  m.index.reserve(m.infos.size());
  for (std::size_t i = 0; i < m.infos.size(); ++i) m.index.emplace(m.infos[i].name, i);
}

SafetensorsReader::~SafetensorsReader() = default;

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const Info& info : impl_->infos) out.push_back(info.name);
  return out;
}

bool SafetensorsReader::has(const std::string& name) const { return impl_->index.count(name) != 0; }

std::optional<TensorInfo> SafetensorsReader::info(const std::string& name) const {
  auto it = impl_->index.find(name);
  if (it == impl_->index.end()) return std::nullopt;
  const Info& i = impl_->infos[it->second];
  return TensorInfo{i.dtype, i.shape};
}

Tensor SafetensorsReader::read(const std::string& name) const {
  const Impl& m = *impl_;
  auto found = m.index.find(name);
  if (found == m.index.end()) fail(where_file(m.path), "holds no tensor '" + printable(name) + "'");
  const Info& info = m.infos[found->second];
  Tensor t(info.dtype, info.shape);
  if (fseeko(m.file.get(), static_cast<off_t>(m.data_start + info.begin), SEEK_SET) != 0 ||
      (t.nbytes() && std::fread(t.raw(), 1, t.nbytes(), m.file.get()) != t.nbytes()))
    fail(where_tensor(m.path, name), "read error (did the file change while it was read?)");
  normalize_bool(t);
  return t;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors) {
  const std::string where = where_file(path);
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& nt : tensors) {
    if (nt.first == "__metadata__") fail(where, "tensor name \"__metadata__\" is reserved by safetensors");
    for (const auto* o : order)
      if (o->first == nt.first) fail(where, "tensor name '" + printable(nt.first) + "' appears twice");
    order.push_back(&nt);
  }
  // The reference writer's order: larger-alignment dtypes first, then by name.
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    int ra = st_dtype(a->second.dtype()).rank, rb = st_dtype(b->second.dtype()).rank;
    return ra != rb ? ra > rb : a->first < b->first;
  });
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto* nt : order) {
    const Tensor& t = nt->second;
    std::string name;
    try {
      name = nlohmann::json(nt->first).dump();
    } catch (const nlohmann::json::exception&) {
      fail(where, "tensor name '" + printable(nt->first) + "' is not valid UTF-8");
    }
    if (header.size() > 1) header += ",";
    header += name + ":{\"dtype\":\"" + st_dtype(t.dtype()).name + "\",\"shape\":[";
    for (int i = 0; i < t.ndim(); ++i) header += (i ? "," : "") + std::to_string(t.dim(i));
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.nbytes()) + "]}";
    offset += t.nbytes();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string out;
  out.reserve(8 + header.size() + offset);
  put64(out, header.size());
  out += header;
  for (const auto* nt : order) out.append(reinterpret_cast<const char*>(nt->second.raw()), nt->second.nbytes());
  write_file_atomic(path, out);
}

}  // namespace mha::io
