// heads_share (parallel/head_parallel.h): a share of a spec's heads, field
// by field as model/spec_fields.h lays them out across heads.
#include <cstring>
#include <utility>
#include <vector>

#include "model/spec_fields.h"
#include "parallel/head_parallel.h"
#include "tensor/tensor_ops.h"
#include "util/error.h"

namespace mha::parallel {

namespace {

using Rows = std::vector<std::pair<int64_t, int64_t>>;  // [start, start + count) ranges, in order

// The row ranges of the share's heads in a per-head field laid out as `l`.
// Query heads [part*h, (part+1)*h) and their key/value heads [part*g, (part+1)*g).
Rows share_rows(const AttentionSpec& s, HeadLayout l, int64_t part, int64_t parts) {
  const int64_t h = s.num_heads / parts, g = s.num_kv_heads / parts;
  const std::pair<int64_t, int64_t> q{part * h * s.head_dim, h * s.head_dim}, k{part * g * s.head_dim, g * s.head_dim},
      v{part * g * s.head_dim_v, g * s.head_dim_v};
  const int64_t k0 = s.num_heads * s.head_dim, v0 = k0 + s.num_kv_heads * s.head_dim;  // QueryKeyValue offsets
  switch (l) {
    case HeadLayout::Query: return {q};
    case HeadLayout::Key: return {k};
    case HeadLayout::Value: return {v};
    case HeadLayout::QueryHead: return {{part * h, h}};
    case HeadLayout::QueryKeyValue: return {q, {k0 + k.first, k.second}, {v0 + v.first, v.second}};
    default: return {};
  }
}

// Rows `rows` of t [r, ...], concatenated, in t's dtype and bits.
Tensor take(const Tensor& t, const Rows& rows) {
  const std::size_t row = (t.dim(0) ? t.numel() / t.dim(0) : 0) * dtype_size(t.dtype());
  Shape shape = t.shape();
  shape[0] = 0;
  for (const auto& r : rows) shape[0] += r.second;
  Tensor out(t.dtype(), shape);
  uint8_t* dst = out.raw();
  for (const auto& [start, count] : rows) {
    std::memcpy(dst, t.raw() + start * row, count * row);
    dst += count * row;
  }
  return out;
}

Tensor take(const Tensor& t, const Rows& rows, ProjectionAxis axis) {
  return axis == ProjectionAxis::Rows ? take(t, rows) : transpose2d(take(transpose2d(t), rows));
}

// One field of the share: per-head tensors cut to the share's rows, head
// counts divided, the output projection dropped (rank 0 applies it to the
// gathered context), everything else kept.
template <class T>
void cut(T& x, HeadLayout l, const AttentionSpec& whole, int64_t part, int64_t parts) {
  if constexpr (std::is_same<T, int64_t>::value) {
    if (l == HeadLayout::QueryCount) x = whole.num_heads / parts;
    if (l == HeadLayout::KvCount) x = whole.num_kv_heads / parts;
  } else if constexpr (std::is_same<T, Tensor>::value) {
    const Rows rows = share_rows(whole, l, part, parts);
    if (!rows.empty()) x = take(x, rows);
  } else if constexpr (std::is_same<T, Projection>::value) {
    const Rows rows = share_rows(whole, l, part, parts);
    if (!rows.empty())
      visit_projection(x, [&](const char*, auto& field, ProjectionAxis axis) {
        for_each_tensor(field, [&](Tensor& t) { t = take(t, rows, axis); });
      });
  } else if constexpr (is_optional<T>::value) {
    if (l == HeadLayout::Gathered) x.reset();
    else if (x) cut(*x, l, whole, part, parts);
  }
}

}  // namespace

AttentionSpec heads_share(const AttentionSpec& s, int64_t part, int64_t parts) {
  if (s.num_heads % parts != 0 || s.num_kv_heads % parts != 0)
    throw InputError("parallel.heads: " + std::to_string(s.num_heads) + " heads (" + std::to_string(s.num_kv_heads) +
                     " key/value heads) do not split into " + std::to_string(parts) + " equal shares");
  AttentionSpec r = s;  // Tensors share their bytes; the per-head ones are replaced below
  r.uid = new_spec_uid();
  visit_spec(r, [&](const char*, auto& field, HeadLayout l) { cut(field, l, s, part, parts); });
  return r;
}

}  // namespace mha::parallel
