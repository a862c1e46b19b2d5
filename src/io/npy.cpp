#include "io/npy.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "io/io_util.h"
#include "io/npy_header.h"
#include "util/error.h"

namespace mha::io::detail {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct Descr {
  DType dtype;
  bool swap;  // stored big-endian, so bytes must be reversed on this host
};

Descr parse_descr(const std::string& descr, const std::string& where) {
  std::string d = descr;
  char order = '=';
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    order = d[0];
    d.erase(0, 1);
  }
  DType t;
  bool ok = true;
  if (d == "?" || d == "b1") t = DType::Bool;
  else if (d == "i1") t = DType::I8;
  else if (d == "i2") t = DType::I16;
  else if (d == "i4") t = DType::I32;
  else if (d == "i8") t = DType::I64;
  else if (d == "u1") t = DType::U8;
  else if (d == "u2") t = DType::U16;
  else if (d == "u4") t = DType::U32;
  else if (d == "u8") t = DType::U64;
  else if (d == "f2") t = DType::F16;
  else if (d == "f4") t = DType::F32;
  else if (d == "f8") t = DType::F64;
  else ok = false;
  if (!ok)
    fail(where, "unsupported dtype '" + printable(descr) +
                    "': expected bool, int8..int64, uint8..uint64 or float16/32/64 (e.g. '<f4', '|b1')");
  return {t, order == '>' && dtype_size(t) > 1};
}

// Fortran order stores the first index fastest; walk the C-order output with
// an odometer and track the matching Fortran offset incrementally. Unit
// dimensions change neither order, so they are dropped first: the odometer's
// carries then cost O(1) per element on average, whatever the shape's length
// (a shape padded with 300,000 ones once cost 300,000 steps per element).
void fortran_to_c(const uint8_t* src, uint8_t* dst, const Shape& full_shape, std::size_t es) {
  std::vector<std::size_t> shape;
  for (int64_t d : full_shape)
    if (d != 1) shape.push_back(static_cast<std::size_t>(d));
  const std::size_t nd = shape.size();
  std::vector<std::size_t> stride(nd), idx(nd, 0);
  std::size_t s = 1;
  for (std::size_t k = 0; k < nd; ++k) {
    stride[k] = s;
    s *= shape[k];
  }
  const std::size_t n = s;
  if (nd <= 1) {  // one non-unit dimension: both orders are the same bytes
    std::memcpy(dst, src, n * es);
    return;
  }
  std::size_t off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * es, src + off * es, es);
    for (std::size_t k = nd; k-- > 0;) {
      off += stride[k];
      if (++idx[k] < shape[k]) break;
      off -= stride[k] * idx[k];
      idx[k] = 0;
    }
  }
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::F16: return "<f2";
    case DType::BF16: break;
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
  }
  return "<f4";
}

}  // namespace

NpyLayout read_npy_layout(std::string_view bytes, const std::string& where) {
  const uint8_t* p = bytes_of(bytes);
  const std::size_t n = bytes.size();
  if (n < kMagicLen || bytes.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    fail(where, "not a .npy file: expected magic \\x93NUMPY, found " + hex_prefix(bytes, 6));
  if (n < 8) fail(where, "truncated .npy preamble: expected at least 10 bytes, found " + std::to_string(n));
  const int major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    fail(where, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    ": expected 1.0, 2.0 or 3.0");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t off = 8 + len_bytes;
  if (n < off)
    fail(where, "truncated .npy preamble: expected at least " + std::to_string(off) + " bytes, found " +
                    std::to_string(n));
  const std::size_t hl = major == 1 ? le16(p + 8) : le32(p + 8);
  if (hl > kMaxNpyHeader)
    fail(where, "header length " + std::to_string(hl) + " exceeds the limit of " + std::to_string(kMaxNpyHeader) +
                    " bytes");
  if (hl > n - off)
    fail(where, "header length " + std::to_string(hl) + " runs past the end of the file: expected at most " +
                    std::to_string(n - off) + " bytes");
  NpyHeader h = parse_npy_header(bytes.substr(off, hl), where);
  Descr d = parse_descr(h.descr, where);

  int64_t numel;
  try {
    numel = shape_numel(h.shape);
  } catch (const InputError& e) {
    fail(where, e.what());
  }
  const std::size_t es = dtype_size(d.dtype);
  if (static_cast<uint64_t>(numel) > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - off - hl) / es)
    fail(where, "shape " + shape_str(h.shape) + " of " + dtype_name(d.dtype) + " needs more bytes than fit in 64 bits");
  NpyLayout l;
  l.dtype = d.dtype;
  l.swap = d.swap;
  l.fortran_order = h.fortran_order;
  l.shape = std::move(h.shape);
  l.data_offset = off + hl;
  l.nbytes = static_cast<uint64_t>(numel) * es;
  return l;
}

Tensor decode_npy(std::string_view bytes, const std::string& where) {
  const NpyLayout l = read_npy_layout(bytes, where);
  const std::size_t n = bytes.size();
  const uint64_t nbytes = l.nbytes;
  const std::size_t es = dtype_size(l.dtype);
  const std::size_t avail = n - l.data_offset;
  // Checked before the tensor is allocated, so a lying shape cannot make us
  // allocate more than the file holds.
  if (avail != nbytes)
    fail(where, std::string(avail < nbytes ? "data is truncated" : "unexpected bytes after the data") + ": shape " +
                    shape_str(l.shape) + " of " + dtype_name(l.dtype) + " needs " + std::to_string(nbytes) +
                    " bytes, found " + std::to_string(avail));
  Tensor t(l.dtype, l.shape);
  const uint8_t* src = bytes_of(bytes) + l.data_offset;
  if (l.fortran_order && l.shape.size() > 1 && nbytes > 0)
    fortran_to_c(src, t.raw(), l.shape, es);
  else if (nbytes > 0)
    std::memcpy(t.raw(), src, nbytes);
  if (l.swap)
    for (uint64_t i = 0; i < nbytes; i += es) std::reverse(t.raw() + i, t.raw() + i + es);
  if (l.dtype == DType::Bool)  // any nonzero byte is True to numpy; keep bool bytes canonical
    for (uint64_t i = 0; i < nbytes; ++i) t.raw()[i] = t.raw()[i] != 0;
  return t;
}

std::string encode_npy_header(DType dtype, const Shape& shape) {
  if (dtype == DType::BF16) dtype = DType::F32;
  std::string dict = std::string("{'descr': '") + descr_of(dtype) +
                     "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // numpy pads so the data starts on a 64-byte boundary and ends the header
  // with a newline.
  std::size_t prefix = 10;
  std::size_t total = prefix + dict.size() + 1;
  if (total + (64 - total % 64) % 64 - prefix > 0xffff) {
    prefix = 12;
    total = prefix + dict.size() + 1;
  }
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  if (prefix == 10) put16(out, static_cast<uint16_t>(dict.size()));
  else put32(out, static_cast<uint32_t>(dict.size()));
  out += dict;
  return out;
}

std::string encode_npy(const Tensor& tensor) {
  Tensor widened;
  const Tensor* tp = &tensor;
  if (tensor.dtype() == DType::BF16) {
    widened = tensor.cast(DType::F32);
    tp = &widened;
  }
  const Tensor& t = *tp;
  std::string out = encode_npy_header(t.dtype(), t.shape());
  out.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

}  // namespace mha::io::detail
