// Ranged .npy reads and writes (io::NpyRows, io::NpyRowWriter): pread and
// pwrite at the rows' offsets, so that a rank of a ring run touches only its
// own rows of a 512 MB input or output.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/io_util.h"
#include "io/npy.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace mha::io {

using namespace detail;

namespace {

// Reads exactly n bytes at `offset`; InputError on a short read.
void pread_all(int fd, uint8_t* dst, uint64_t n, uint64_t offset, const std::string& where) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, dst, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail(where, got < 0 ? std::string("read failed: ") + std::strerror(errno) : "file shrank while read");
    dst += got, n -= static_cast<uint64_t>(got), offset += static_cast<uint64_t>(got);
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

NpyRows::NpyRows(const std::string& path) : path_(path) {
  const std::string where = where_file(path);
  Fd f;
  uint64_t file_size = 0;
  f.fd = open_regular_file(path, &file_size);
  // The header sits in the first kNpyPreambleMax + kMaxNpyHeader bytes.
  std::string head(std::min<uint64_t>(file_size, kNpyPreambleMax + kMaxNpyHeader), '\0');
  pread_all(f.fd, reinterpret_cast<uint8_t*>(head.data()), head.size(), 0, where);
  const NpyLayout l = read_npy_layout(head, where);
  const uint64_t avail = file_size - l.data_offset;
  if (avail != l.nbytes)
    fail(where, std::string(avail < l.nbytes ? "data is truncated" : "unexpected bytes after the data") + ": shape " +
                    shape_str(l.shape) + " of " + dtype_name(l.dtype) + " needs " + std::to_string(l.nbytes) +
                    " bytes, found " + std::to_string(avail));
  if (l.shape.size() < 2) fail(where, "expected an array [batch, tokens, ...], found shape " + shape_str(l.shape));
  if (l.fortran_order && l.nbytes > 0)
    fail(where, "Fortran-order data cannot be read by token rows; save it in C order (numpy's default)");
  dtype_ = l.dtype, shape_ = l.shape, swap_ = l.swap, data_offset_ = l.data_offset;
}

Tensor NpyRows::read(const std::vector<std::pair<int64_t, int64_t>>& ranges) const {
  const std::string where = where_file(path_);
  const int64_t B = shape_[0], L = shape_[1];
  int64_t n = 0;
  for (const auto& [start, len] : ranges) {
    if (start < 0 || len < 0 || start + len > L)
      fail(where, "rows [" + std::to_string(start) + ", " + std::to_string(start + len) + ") outside the file's " +
                      std::to_string(L) + " rows");
    n += len;
  }
  Shape shape = shape_;
  shape[1] = n;
  Tensor t(dtype_, shape);
  if (t.numel() == 0) return t;
  const std::size_t es = dtype_size(dtype_);
  const uint64_t row = static_cast<uint64_t>(t.numel() / (B * n)) * es;
  Fd f;
  f.fd = open_regular_file(path_, nullptr);
  uint8_t* dst = t.raw();
  for (int64_t b = 0; b < B; ++b)
    for (const auto& [start, len] : ranges) {
      pread_all(f.fd, dst, len * row, data_offset_ + (b * L + start) * row, where);
      dst += len * row;
    }
  if (swap_)
    for (uint64_t i = 0; i < t.nbytes(); i += es) std::reverse(t.raw() + i, t.raw() + i + es);
  if (dtype_ == DType::Bool)
    for (uint64_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = t.raw()[i] != 0;
  return t;
}

NpyRowWriter::NpyRowWriter(const std::string& path, DType dtype, const Shape& shape) : path_(path), shape_(shape) {
  if (dtype == DType::BF16) throw std::logic_error("NpyRowWriter: bfloat16 has no .npy dtype");
  if (shape.size() < 2) throw std::logic_error("NpyRowWriter: expected [B, L, ...]");
  const std::string header = encode_npy_header(dtype, shape);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(where_file(path), std::string("cannot write: ") + std::strerror(errno));
  data_offset_ = header.size();
  row_bytes_ = static_cast<uint64_t>(shape_numel(shape) / std::max<int64_t>(shape[0] * shape[1], 1)) * dtype_size(dtype);
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
    fail(where_file(path), std::string("write failed: ") + std::strerror(errno));
  // The whole size up front: a full disk shows here, not half-way through.
  const uint64_t total = data_offset_ + static_cast<uint64_t>(shape[0] * shape[1]) * row_bytes_;
  if (::ftruncate(fd_, static_cast<off_t>(total)) != 0)
    fail(where_file(path), std::string("cannot size the file: ") + std::strerror(errno));
}

NpyRowWriter::~NpyRowWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void NpyRowWriter::write(int64_t b, int64_t start, int64_t count, const void* rows) {
  if (count == 0) return;
  if (b < 0 || b >= shape_[0] || start < 0 || start + count > shape_[1])
    throw std::logic_error("NpyRowWriter::write: rows outside the tensor");
  const uint8_t* src = static_cast<const uint8_t*>(rows);
  uint64_t n = static_cast<uint64_t>(count) * row_bytes_;
  uint64_t off = data_offset_ + static_cast<uint64_t>(b * shape_[1] + start) * row_bytes_;
  while (n > 0) {
    const ssize_t put = ::pwrite(fd_, src, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(off));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) fail(where_file(path_), std::string("write failed: ") + std::strerror(errno));
    src += put, n -= static_cast<uint64_t>(put), off += static_cast<uint64_t>(put);
  }
}

void NpyRowWriter::close() {  // as write_file_atomic: no fsync
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    fail(where_file(path_), std::string("write failed: ") + std::strerror(errno));
}

}  // namespace mha::io
