#include "backends/cpu/cpu_projection.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_gemm.h"
#include "util/huge_pages.h"

namespace mha::cpu {

int64_t PackedLinear::group_width() const {
  int64_t w = 0;
  for (int64_t b : block) w += b;
  return block.empty() ? out : w;
}

PackedLinear pack_linear(const Projection& p) { return pack_stacked({&p}); }

PackedLinear pack_stacked(const std::vector<const Projection*>& ps, const std::vector<int64_t>& block) {
  PackedLinear lin;
  lin.in = ps.front()->weight.dim(1);
  bool any_bias = false;
  for (const Projection* p : ps) {
    lin.rows.push_back(p->weight.dim(0));
    lin.out += p->weight.dim(0);
    any_bias |= p->bias.has_value();
  }
  lin.block = block;
  // Fresh memory costs a page fault per 4 KiB on first touch: reserve, ask
  // for huge pages, then copy straight from the tensors (no float32
  // temporaries, whose pages would each be faulted in and thrown away).
  lin.w.reserve(lin.out * lin.in);
  advise_huge_pages(lin.w.data(), sizeof(float) * lin.out * lin.in);
  // Rows [r0, r0 + n) of t (an [rows, width] matrix or a [rows] vector);
  // other dtypes converted once per tensor.
  std::vector<std::pair<const Tensor*, std::vector<float>>> converted;
  auto append = [&](std::vector<float>& dst, const Tensor& t, int64_t r0, int64_t n) {
    const int64_t width = t.numel() / t.dim(0);
    const float* f = nullptr;
    if (t.dtype() == DType::F32) {
      f = t.data<float>();
    } else {
      auto it = std::find_if(converted.begin(), converted.end(), [&](const auto& c) { return c.first == &t; });
      if (it == converted.end()) it = converted.insert(converted.end(), {&t, t.to_f32()});
      f = it->second.data();
    }
    dst.insert(dst.end(), f + r0 * width, f + (r0 + n) * width);
  };
  const int64_t groups = lin.groups();
  for (int64_t g = 0; g < groups; ++g)
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const Projection* p = ps[i];
      const int64_t n = block.empty() ? lin.rows[i] : block[i], r0 = g * n;
      append(lin.w, p->weight, r0, n);
      if (!any_bias) continue;
      if (p->bias)
        append(lin.b, *p->bias, r0, n);
      else
        lin.b.insert(lin.b.end(), n, 0.0f);
    }
  return lin;
}

namespace {

// Grouped: per group g and block of kRowBlock rows, x . [Wq_g; Wk_g; Wv_g]^T
// into a per-thread buffer, then each projection's columns to their place
// in y. The calls depend on the shape only, so the bits do not depend on
// the pool's size; one task per (row block, group) keeps every thread busy.
void linear_grouped(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
                    int64_t ldy) {
  const int64_t G = lin.groups(), gw = lin.group_width(), np = static_cast<int64_t>(lin.rows.size());
  const bool bias = !lin.b.empty();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(blocks * G, [&](int64_t t, int) {
    const int64_t r = t / G * kRowBlock, g = t % G, m = std::min(kRowBlock, rows - r);
    thread_local std::vector<float> buf;
    if (np > 1 && static_cast<int64_t>(buf.size()) < m * gw) buf.resize(m * gw);
    const float* w = lin.w.data() + g * gw * lin.in;
    // One projection: the group's columns are contiguous in y too.
    float* c = np == 1 ? y + r * ldy + g * gw : buf.data();
    const int64_t ldc = np == 1 ? ldy : gw;
    if (bias)
      for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, lin.b.data() + g * gw, sizeof(float) * gw);
    sgemm(true, m, gw, lin.in, x + r * ldx, ldx, w, lin.in, bias ? 1.0f : 0.0f, c, ldc);
    if (np == 1) return;
    int64_t src = 0, dst = 0;  // column of projection p's group g: in buf, in y
    for (int64_t p = 0; p < np; ++p) {
      const int64_t n = lin.block[p];
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(y + (r + i) * ldy + dst + g * n, buf.data() + i * gw + src, sizeof(float) * n);
      src += n, dst += lin.rows[p];
    }
  });
}

}  // namespace

void linear(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
            int64_t ldy) {
  if (rows == 0 || lin.out == 0) return;
  if (!lin.block.empty()) return linear_grouped(pool, lin, x, ldx, rows, y, ldy);
  const bool bias = !lin.b.empty();
  if (bias) {
    const int64_t chunk = 256;
    pool.parallel_for((rows + chunk - 1) / chunk, [&](int64_t t, int) {
      for (int64_t r = t * chunk; r < std::min(rows, (t + 1) * chunk); ++r)
        std::memcpy(y + r * ldy, lin.b.data(), sizeof(float) * lin.out);
    });
  }
  sgemm(pool, true, rows, lin.out, lin.in, x, ldx, lin.w.data(), lin.in, bias ? 1.0f : 0.0f, y, ldy);
}

}  // namespace mha::cpu
