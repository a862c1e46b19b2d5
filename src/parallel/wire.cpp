#include "parallel/wire.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "model/spec_fields.h"

namespace mha::parallel {

void Writer::i64(int64_t v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void Writer::f64(double v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void Writer::str(const std::string& s) {
  i64(static_cast<int64_t>(s.size()));
  buf_ += s;
}
void Writer::tensor(const Tensor& t) {
  i64(static_cast<int64_t>(t.dtype()));
  i64(t.ndim());
  for (int64_t d : t.shape()) i64(d);
  buf_.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
}
void Writer::opt_tensor(const std::optional<Tensor>& t) {
  i64(t ? 1 : 0);
  if (t) tensor(*t);
}

const char* Reader::take(std::size_t n) {
  if (n > buf_.size() - pos_) throw std::runtime_error("parallel: message from rank 0 ends early");
  const char* p = buf_.data() + pos_;
  pos_ += n;
  return p;
}
int64_t Reader::i64() {
  int64_t v;
  std::memcpy(&v, take(sizeof v), sizeof v);
  return v;
}
double Reader::f64() {
  double v;
  std::memcpy(&v, take(sizeof v), sizeof v);
  return v;
}
std::string Reader::str() {
  std::size_t n = static_cast<std::size_t>(i64());
  return std::string(take(n), n);
}
Tensor Reader::tensor() {
  DType dt = static_cast<DType>(i64());
  Shape shape(static_cast<std::size_t>(i64()));
  for (int64_t& d : shape) d = i64();
  Tensor t(dt, shape);
  std::memcpy(t.raw(), take(t.nbytes()), t.nbytes());
  return t;
}
std::optional<Tensor> Reader::opt_tensor() {
  if (!i64()) return std::nullopt;
  return tensor();
}

namespace {

template <class T>
struct no_encoding : std::false_type {};

// One field of a spec, by its type; get() reads what put() wrote.
template <class T>
void put(Writer& w, const T& x) {
  if constexpr (std::is_same<T, std::string>::value) {
    w.str(x);
  } else if constexpr (std::is_integral<T>::value || std::is_enum<T>::value) {
    w.i64(static_cast<int64_t>(x));
  } else if constexpr (std::is_same<T, double>::value) {
    w.f64(x);
  } else if constexpr (std::is_same<T, Tensor>::value) {
    w.tensor(x);
  } else if constexpr (std::is_same<T, Projection>::value) {
    visit_projection(x, [&](const char*, const auto& field, ProjectionAxis) { put(w, field); });
  } else if constexpr (std::is_same<T, RotaryEmbedding>::value) {
    visit_rope(x, [&](const auto& field) { put(w, field); });
  } else if constexpr (std::is_same<T, QkNorm>::value) {
    visit_qk_norm(x, [&](const auto& field) { put(w, field); });
  } else if constexpr (std::is_same<T, Mla>::value) {
    visit_mla(x, [&](const auto& field) { put(w, field); });
  } else if constexpr (is_optional<T>::value) {
    w.i64(x ? 1 : 0);
    if (x) put(w, *x);
  } else {
    static_assert(no_encoding<T>::value, "a spec field of a type the wire format cannot encode");
  }
}

template <class T>
void get(Reader& r, T& x) {
  if constexpr (std::is_same<T, std::string>::value) {
    x = r.str();
  } else if constexpr (std::is_same<T, bool>::value) {
    x = r.i64() != 0;
  } else if constexpr (std::is_integral<T>::value || std::is_enum<T>::value) {
    x = static_cast<T>(r.i64());
  } else if constexpr (std::is_same<T, double>::value) {
    x = r.f64();
  } else if constexpr (std::is_same<T, Tensor>::value) {
    x = r.tensor();
  } else if constexpr (std::is_same<T, Projection>::value) {
    visit_projection(x, [&](const char*, auto& field, ProjectionAxis) { get(r, field); });
  } else if constexpr (std::is_same<T, RotaryEmbedding>::value) {
    visit_rope(x, [&](auto& field) { get(r, field); });
  } else if constexpr (std::is_same<T, QkNorm>::value) {
    visit_qk_norm(x, [&](auto& field) { get(r, field); });
  } else if constexpr (std::is_same<T, Mla>::value) {
    visit_mla(x, [&](auto& field) { get(r, field); });
  } else if constexpr (is_optional<T>::value) {
    if (r.i64()) {
      x.emplace();
      get(r, *x);
    } else {
      x.reset();
    }
  } else {
    static_assert(no_encoding<T>::value, "a spec field of a type the wire format cannot encode");
  }
}

}  // namespace

void write_spec(Writer& w, const AttentionSpec& s) {
  visit_spec(s, [&](const char*, const auto& field, HeadLayout) { put(w, field); });
}

AttentionSpec read_spec(Reader& r) {
  AttentionSpec s;
  visit_spec(s, [&](const char*, auto& field, HeadLayout) { get(r, field); });
  return s;
}

// Self-attention passes one tensor as query, key and value; it travels once
// and arrives as one tensor again (backends detect the sharing).
void write_inputs(Writer& w, const AttentionInputs& in) {
  const bool k_is_q = in.key.raw() == in.query.raw(), v_is_k = in.value.raw() == in.key.raw();
  w.tensor(in.query);
  w.i64(k_is_q);
  if (!k_is_q) w.tensor(in.key);
  w.i64(v_is_k);
  if (!v_is_k) w.tensor(in.value);
  w.opt_tensor(in.mask);
  w.opt_tensor(in.positions);
  w.i64(in.training);
  w.i64(static_cast<int64_t>(in.dropout_seed));
}

AttentionInputs read_inputs(Reader& r) {
  AttentionInputs in;
  in.query = r.tensor();
  in.key = r.i64() ? in.query : r.tensor();
  in.value = r.i64() ? in.key : r.tensor();
  in.mask = r.opt_tensor();
  in.positions = r.opt_tensor();
  in.training = r.i64() != 0;
  in.dropout_seed = static_cast<uint64_t>(r.i64());
  return in;
}

}  // namespace mha::parallel
