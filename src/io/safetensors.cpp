#include <algorithm>
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
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header.begin(), header.end());
  } catch (const nlohmann::json::exception& e) {
    fail(where, "header is not valid JSON: " + printable(e.what()));
  }
  if (!j.is_object()) fail(where, "header is not a JSON object");
  std::vector<Info> infos;
  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) fail(where, "\"__metadata__\" is not a JSON object");
      for (const auto& [mk, mv] : v.items())
        if (!mv.is_string())
          fail(where, "\"__metadata__\" value for \"" + printable(mk) + "\" is not a string");
      continue;
    }
    infos.push_back(parse_info(key, v, path));
  }
  return infos;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path) { return detail::decode_safetensors(read_file_bytes(path), path); }

NamedTensors detail::decode_safetensors(std::string_view bytes, const std::string& path) {
  const std::string where = where_file(path);
  if (bytes.size() < 8)
    fail(where, "file is " + std::to_string(bytes.size()) + " bytes, expected at least 8 (the header length)");
  const uint64_t n = le64(bytes_of(bytes));
  if (n > kMaxHeader)
    fail(where, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeader) + " bytes");
  if (n > bytes.size() - 8)
    fail(where, "header length " + std::to_string(n) + " runs past the end of the file: " +
                    std::to_string(bytes.size() - 8) + " bytes follow the length field");
  std::vector<Info> infos = parse_header(bytes.substr(8, n), path);

  // As the reference does: in offset order, tensors must tile the data
  // buffer exactly, each holding numel * dtype size bytes.
  std::sort(infos.begin(), infos.end(), [](const Info& a, const Info& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const uint64_t buffer = bytes.size() - 8 - n;
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
    fail(where, "tensors cover " + std::to_string(pos) + " bytes of the data buffer, expected all " +
                    std::to_string(buffer) + " bytes");

  NamedTensors out;
  out.reserve(infos.size());
  const uint8_t* data = bytes_of(bytes) + 8 + n;
  for (const Info& info : infos) {
    Tensor t(info.dtype, info.shape);
    if (t.nbytes()) std::memcpy(t.raw(), data + info.begin, t.nbytes());
    if (info.dtype == DType::Bool)
      for (std::size_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = t.raw()[i] != 0;
    out.emplace_back(info.name, std::move(t));
  }
  return out;
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
