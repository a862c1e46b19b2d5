#include "parallel/wire.h"

#include <cstring>
#include <stdexcept>

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

void write_projection(Writer& w, const Projection& p) {
  w.tensor(p.weight);
  w.opt_tensor(p.bias);
}
Projection read_projection(Reader& r) {
  Projection p;
  p.weight = r.tensor();
  p.bias = r.opt_tensor();
  return p;
}

}  // namespace

void write_spec(Writer& w, const AttentionSpec& s) {
  w.str(s.variant);
  for (int64_t v : {static_cast<int64_t>(s.ops), s.num_heads, s.num_kv_heads, s.head_dim, s.head_dim_v,
                    static_cast<int64_t>(s.causal), s.window, static_cast<int64_t>(s.add_zero_attn),
                    static_cast<int64_t>(s.rope.has_value())})
    w.i64(v);
  w.f64(s.scale);
  w.f64(s.dropout);
  w.f64(s.rope ? s.rope->theta : 0.0);
  for (const Projection* p : {&s.q, &s.k, &s.v}) write_projection(w, *p);
  w.opt_tensor(s.bias_k);
  w.opt_tensor(s.bias_v);
}

AttentionSpec read_spec(Reader& r) {
  AttentionSpec s;
  s.variant = r.str();
  s.ops = static_cast<OpSequence>(r.i64());
  s.num_heads = r.i64();
  s.num_kv_heads = r.i64();
  s.head_dim = r.i64();
  s.head_dim_v = r.i64();
  s.causal = r.i64() != 0;
  s.window = r.i64();
  s.add_zero_attn = r.i64() != 0;
  const bool rope = r.i64() != 0;
  s.scale = r.f64();
  s.dropout = r.f64();
  const double theta = r.f64();
  if (rope) s.rope = RotaryEmbedding{theta};
  s.q = read_projection(r);
  s.k = read_projection(r);
  s.v = read_projection(r);
  s.bias_k = r.opt_tensor();
  s.bias_v = r.opt_tensor();
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
