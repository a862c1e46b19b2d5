#pragma once
// What rank 0 sends a rank: a flat byte string of scalars, strings and
// tensors (dtype, shape, raw bytes), read back in the same order. Both ends
// are the same binary, so no versioning or byte-order marks.
#include <cstdint>
#include <optional>
#include <string>

#include "model/attention.h"

namespace mha::parallel {

class Writer {
 public:
  void i64(int64_t v);
  void f64(double v);
  void str(const std::string& s);
  void tensor(const Tensor& t);
  void opt_tensor(const std::optional<Tensor>& t);
  const std::string& bytes() const { return buf_; }

 private:
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : buf_(bytes) {}
  int64_t i64();
  double f64();
  std::string str();
  Tensor tensor();
  std::optional<Tensor> opt_tensor();

 private:
  const char* take(std::size_t n);
  const std::string& buf_;
  std::size_t pos_ = 0;
};

// Every field of a spec (model/spec_fields.h) but its uid: the reader's
// spec is a new one for plan caches. Inputs with their tensors.
void write_spec(Writer& w, const AttentionSpec& s);
AttentionSpec read_spec(Reader& r);
void write_inputs(Writer& w, const AttentionInputs& in);
AttentionInputs read_inputs(Reader& r);

}  // namespace mha::parallel
