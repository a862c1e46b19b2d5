#include "backends/ttsim/ttsim_recipe.h"

#include <algorithm>
#include <cstring>

namespace mha::ttsim {

namespace {

bool block_float(DataFormat f) { return bfp_magnitude_bits(f) > 0; }

// (out, in) float32 weight -> the (in, out) operand the matmul sees; the
// transpose (transpose_b, or the seed's (in, out) storage) is exact.
std::vector<float> transposed(const Tensor& w) {
  const int64_t o = w.dim(0), i = w.dim(1);
  const float* p = w.data<float>();
  std::vector<float> t(static_cast<size_t>(o * i));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < i; ++c) t[c * o + r] = p[r * i + c];
  return t;
}

TileTensor weight_tile(const Projection& p, DataFormat f) {
  if (p.weight_in_out) return to_tile_layout(*p.weight_in_out, f);
  return to_tile_layout(transposed(p.weight).data(), {p.weight.dim(1), p.weight.dim(0)}, f);
}
TileTensor row_tile(const Tensor& b, DataFormat f) { return to_tile_layout(b.data<float>(), {1, b.numel()}, f); }

// ttnn.concat([query_weight, key_weight, value_weight], dim=-1) for a spec
// that does not hold the fused form: (in, Eq+Ek+Ev) and its bias row.
void concat_qkv(const AttentionSpec& spec, DataFormat f, DeviceWeights& w) {
  const int64_t in = spec.q_in(), hq = spec.q.weight.dim(0), hk = spec.k.weight.dim(0), hv = spec.v.weight.dim(0);
  const int64_t width = hq + hk + hv;
  std::vector<float> cat(static_cast<size_t>(in * width)), bias(static_cast<size_t>(width), 0.0f);
  int64_t off = 0;
  for (const Projection* p : {&spec.q, &spec.k, &spec.v}) {
    const int64_t n = p->weight.dim(0);
    std::vector<float> t = transposed(p->weight);
    for (int64_t i = 0; i < in; ++i) std::copy_n(&t[i * n], n, &cat[i * width + off]);
    if (p->bias) std::copy_n(p->bias->data<float>(), n, &bias[off]);
    off += n;
  }
  w.wqkv = to_tile_layout(cat.data(), {in, width}, f);
  w.bqkv = to_tile_layout(bias.data(), {1, width}, f);
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.raw() == b.raw() || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

}  // namespace

Recipe make_recipe(OpSequence ops, const TtOptions& o) {
  Recipe r;
  r.pipeline = ops;
  r.fused_qkv = ops == OpSequence::TtnnMhaFused;
  const DataFormat dt = o.dtype.value_or(r.fused_qkv ? DataFormat::Bfp8_b : DataFormat::Bfloat16);
  // The fused seed keeps hidden states, weights, scores and the output in
  // bfloat16 and asks for its `dtype` on the QKV and context matmuls only.
  r.act = r.fused_qkv ? DataFormat::Bfloat16 : dt;
  r.qkv_out = r.ctx_out = dt;
  r.scores_out = r.out_out = r.act;
  r.fp32_dest = o.fp32_dest_acc_en.value_or(false);
  r.bfp8_pack_precise = o.bfp8_pack_precise.value_or(false);
  ComputeConfig mm;
  mm.fp32_dest_acc_en = r.fp32_dest;
  mm.bfp8_pack_precise = r.bfp8_pack_precise;
  mm.math_approx_mode = o.math_approx_mode.value_or(true);
  mm.numerics = o.numerics;
  apply_device(mm, o);
  // `@` without core_grid: HiFi2 unless both operands are block float; a
  // core_grid (seed 000, the fused seed) selects LoFi.
  const bool plain_ops = ops == OpSequence::TtnnMha;
  MathFidelity mm_default = plain_ops && !block_float(r.act) ? MathFidelity::HiFi2 : MathFidelity::LoFi;
  mm.math_fidelity = o.math_fidelity.value_or(mm_default);
  r.linear = r.matmul = mm;
  r.softmax = softmax_default_config();
  r.softmax.math_fidelity = o.math_fidelity.value_or(MathFidelity::HiFi4);
  r.softmax.math_approx_mode = o.math_approx_mode.value_or(true);
  r.softmax.fp32_dest_acc_en = r.fp32_dest;
  r.softmax.bfp8_pack_precise = r.bfp8_pack_precise;
  r.softmax.numerics = o.numerics;
  apply_device(r.softmax, o);
  r.softmax.output = r.scores_out;
  const int dy = o.device.grid_y, dx = o.device.grid_x;
  Grid g{dy, dx};
  if (ops == OpSequence::Book) g = {std::min(8, dy), std::min(8, dx)};
  if (r.fused_qkv) g = {std::min(8, dy), std::min(12, dx)};
  r.grid = o.core_grid.value_or(Grid{g.y, g.x});
  r.core_grid = !plain_ops || o.core_grid.has_value();
  r.memory = o.memory.value_or(plain_ops ? MemoryKind::DRAM : MemoryKind::L1);
  return r;
}

nlohmann::json recipe_json(const Recipe& r) {
  return {{"pipeline", op_sequence_name(r.pipeline)},
          {"dtype", format_name(r.act)},
          {"qkv_dtype", format_name(r.qkv_out)},
          {"context_dtype", format_name(r.ctx_out)},
          {"matmul_fidelity", fidelity_name(r.matmul.math_fidelity)},
          {"softmax_fidelity", fidelity_name(r.softmax.math_fidelity)},
          {"fp32_dest_acc_en", r.fp32_dest},
          {"bfp8_pack_precise", r.bfp8_pack_precise},
          {"math_approx_mode", r.softmax.math_approx_mode},
          {"memory_config", memory_name(r.memory)},
          {"core_grid", {r.grid.y, r.grid.x}},
          {"core_grid_given", r.core_grid},
          {"numerics", numerics_name(r.matmul.numerics)}};
}

std::vector<const TileTensor*> DeviceWeights::all() const {
  std::vector<const TileTensor*> v;
  for (const TileTensor* t : {&wq, &wk, &wv, &wqkv, &wo})
    if (!t->data.empty()) v.push_back(t);
  for (const auto* t : {&bq, &bk, &bv, &bqkv, &bo, &bias_k, &bias_v})
    if (*t) v.push_back(&**t);
  return v;
}

DeviceWeights convert_weights(const AttentionSpec& spec, const Recipe& r) {
  DeviceWeights w;
  const DataFormat f = r.act;
  if (r.fused_qkv && spec.qkv_fused) {
    w.wqkv = weight_tile(*spec.qkv_fused, f);
    std::vector<float> zeros(static_cast<size_t>(w.wqkv.cols), 0.0f);
    w.bqkv = spec.qkv_fused->bias ? row_tile(*spec.qkv_fused->bias, f)
                                  : to_tile_layout(zeros.data(), {1, w.wqkv.cols}, f);
  } else if (r.fused_qkv) {
    concat_qkv(spec, f, w);
  } else {
    w.wq = weight_tile(spec.q, f);
    w.wk = weight_tile(spec.k, f);
    w.wv = weight_tile(spec.v, f);
    if (spec.q.bias) w.bq = row_tile(*spec.q.bias, f);
    if (spec.k.bias) w.bk = row_tile(*spec.k.bias, f);
    if (spec.v.bias) w.bv = row_tile(*spec.v.bias, f);
  }
  if (spec.out) {
    w.wo = weight_tile(*spec.out, f);
    if (spec.out->bias) w.bo = row_tile(*spec.out->bias, f);
  }
  if (spec.bias_k) w.bias_k = row_tile(*spec.bias_k, f);
  if (spec.bias_v) w.bias_v = row_tile(*spec.bias_v, f);
  return w;
}

std::optional<std::string> tt_supports(const AttentionSpec& spec, const AttentionInputs& in) {
  if (in.training && spec.dropout > 0.0)
    return "dropout in training (p = " + std::to_string(spec.dropout) +
           ") is not supported on tt-sim (ttnn.experimental.dropout's device RNG is not modelled); "
           "run in eval mode or on the cpu/reference backend";
  if (spec.rope) return std::string("rotary position embeddings are not implemented on tt-sim; run on cpu or reference");
  if (spec.ops == OpSequence::TtnnMhaFused) {
    if (spec.extra_keys() > 0 || spec.num_kv_heads != spec.num_heads)
      return std::string("the fused TT-NN pipeline supports neither extra key rows nor grouped kv heads");
    if (!same_tensor(in.query, in.key) || !same_tensor(in.query, in.value))
      return std::string("the fused TT-NN pipeline projects one input: query, key and value must be the same tensor");
  }
  return std::nullopt;
}

}  // namespace mha::ttsim
