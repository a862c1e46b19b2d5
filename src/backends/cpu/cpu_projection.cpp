#include "backends/cpu/cpu_projection.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_gemm.h"
#include "util/huge_pages.h"

namespace mha::cpu {

PackedLinear pack_linear(const Projection& p) { return pack_stacked({&p}); }

PackedLinear pack_stacked(const std::vector<const Projection*>& ps, const std::vector<int64_t>& block) {
  PackedLinear lin;
  lin.in = ps.front()->weight.dim(1);
  bool any_bias = false;
  for (const Projection* p : ps) {
    lin.out += p->weight.dim(0);
    any_bias |= p->bias.has_value();
  }
  // Fresh memory costs a page fault per 4 KiB on first touch: reserve, ask
  // for huge pages, then copy straight from the tensors (no float32
  // temporaries, whose pages would each be faulted in and thrown away).
  lin.w.reserve(lin.out * lin.in);
  advise_huge_pages(lin.w.data(), sizeof(float) * lin.out * lin.in);
  auto append = [](std::vector<float>& dst, const Tensor& t) {
    if (t.dtype() == DType::F32) {
      dst.insert(dst.end(), t.data<float>(), t.data<float>() + t.numel());
    } else {
      std::vector<float> v = t.to_f32();
      dst.insert(dst.end(), v.begin(), v.end());
    }
  };
  for (const Projection* p : ps) {
    append(lin.w, p->weight);
    if (!any_bias) continue;
    if (p->bias)
      append(lin.b, *p->bias);
    else
      lin.b.insert(lin.b.end(), p->weight.dim(0), 0.0f);
  }
  if (!block.empty()) {
    int64_t edge = 0;
    for (std::size_t i = 0; i < ps.size(); ++i)
      for (int64_t r = 0; r < ps[i]->weight.dim(0); r += block[i]) lin.cols.push_back(edge += block[i]);
  }
  return lin;
}

void linear(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
            int64_t ldy) {
  if (rows == 0 || lin.out == 0) return;
  const bool bias = !lin.b.empty();
  if (bias) {
    const int64_t chunk = 256;
    pool.parallel_for((rows + chunk - 1) / chunk, [&](int64_t t, int) {
      for (int64_t r = t * chunk; r < std::min(rows, (t + 1) * chunk); ++r)
        std::memcpy(y + r * ldy, lin.b.data(), sizeof(float) * lin.out);
    });
  }
  int64_t c0 = 0;
  for (std::size_t i = 0; i < std::max<std::size_t>(1, lin.cols.size()); ++i) {
    const int64_t c1 = lin.cols.empty() ? lin.out : lin.cols[i];
    sgemm(pool, true, rows, c1 - c0, lin.in, x, ldx, lin.w.data() + c0 * lin.in, lin.in, bias ? 1.0f : 0.0f, y + c0,
          ldy);
    c0 = c1;
  }
}

}  // namespace mha::cpu
