#pragma once
// Reading and writing tensor files: .npy, .npz, .safetensors, and a folder of
// .npy files. Every byte read is treated as hostile: header sizes bounded,
// sizes overflow-checked, offsets checked against the file. Errors are
// InputError with one line naming the file (and tensor) and the problem.
// Every writer writes a temporary file in the destination folder and renames
// it into place, so a failed write never leaves a half-written file.
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "tensor/tensor.h"

namespace mha::io {

// Versions 1.0-3.0, either byte order, C or Fortran order (returned in C
// order). The data must fill the file exactly. numpy has no bfloat16, so
// write_npy widens bfloat16 to float32 (exact); it reads back as float32.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// Stored and deflated members, zip64 included; member NAME.npy is tensor
// NAME, in archive order. The writer stores members uncompressed.
NamedTensors read_npz(const std::string& path);
void write_npz(const std::string& path, const NamedTensors& tensors);

// Validated as the reference implementation does; tensors come back in data
// order. The writer lays files out exactly as the reference serializer does.
NamedTensors read_safetensors(const std::string& path);
void write_safetensors(const std::string& path, const NamedTensors& tensors);

struct TensorInfo {
  DType dtype;
  Shape shape;
};

// A .safetensors file read piecemeal, for checkpoints far larger than the few
// tensors wanted from them: the constructor reads and validates the header
// (the whole layout, as read_safetensors does, against the file's size);
// read() then reads only that tensor's bytes.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  std::vector<std::string> names() const;  // in data order
  bool has(const std::string& name) const;  // hashed: O(1) per name
  // A tensor's dtype and shape from the header, without reading its data.
  std::optional<TensorInfo> info(const std::string& name) const;
  Tensor read(const std::string& name) const;  // InputError when the file holds no such tensor

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every tensor in a .npy (named after the file stem), .npz, .safetensors, or
// a folder of NAME.npy files, chosen by extension / file type.
NamedTensors read_all(const std::string& path);

// One tensor by spec: "FILE.npy", "FILE.npz:NAME" or "FILE.safetensors:NAME".
Tensor read_tensor(const std::string& spec);
// The file part of such a spec, as read_tensor splits it.
std::string tensor_spec_file(const std::string& spec);

// Row ranges of a .npy file, for a tensor too large to hold whole.
//
// NpyRows reads the header only (validated as read_npy does, and the file's
// size checked against it); read() then reads, for every batch b of a C-order
// array [B, L, ...] and every range [start, start + len) of dim 1, just those
// rows, in range order: [B, sum of len, ...], byte-swapped to this host.
// Fortran-order files and arrays of fewer than 2 dims are refused.
class NpyRows {
 public:
  explicit NpyRows(const std::string& path);
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Tensor read(const std::vector<std::pair<int64_t, int64_t>>& ranges) const;

 private:
  std::string path_;
  DType dtype_ = DType::F32;
  Shape shape_;
  bool swap_ = false;
  uint64_t data_offset_ = 0;
};

// A .npy file written by row ranges: the header for [B, L, ...] of `dtype`
// now, then rows at their place as they arrive, in any order. Meant for a
// temporary that is renamed into place (io::OutputSet) once every row is in.
class NpyRowWriter {
 public:
  NpyRowWriter(const std::string& path, DType dtype, const Shape& shape);
  ~NpyRowWriter();
  NpyRowWriter(const NpyRowWriter&) = delete;
  NpyRowWriter& operator=(const NpyRowWriter&) = delete;
  // Rows [start, start + count) of batch b, `count` rows of bytes laid out as the file's.
  void write(int64_t b, int64_t start, int64_t count, const void* rows);
  void close();  // flushes; InputError when the disk refused a write

 private:
  std::string path_;
  int fd_ = -1;
  Shape shape_;
  uint64_t data_offset_ = 0, row_bytes_ = 0;
};

// Writes `bytes` to `path` through a temporary file renamed into place.
void write_file_atomic(const std::string& path, const std::string& bytes);

namespace detail {
// read_npz / read_safetensors over bytes already in memory (the fuzz targets
// call these); `path` names the file in errors.
NamedTensors decode_npz(std::string_view bytes, const std::string& path);
NamedTensors decode_safetensors(std::string_view bytes, const std::string& path);
}  // namespace detail

}  // namespace mha::io
