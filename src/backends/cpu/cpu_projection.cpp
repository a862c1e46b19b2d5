#include "backends/cpu/cpu_projection.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_gemm.h"

namespace mha::cpu {

PackedLinear pack_linear(const Projection& p) { return pack_stacked({&p}); }

PackedLinear pack_stacked(const std::vector<const Projection*>& ps) {
  PackedLinear lin;
  lin.in = ps.front()->weight.dim(1);
  bool any_bias = false;
  for (const Projection* p : ps) {
    lin.out += p->weight.dim(0);
    any_bias |= p->bias.has_value();
  }
  lin.w.reserve(lin.out * lin.in);
  for (const Projection* p : ps) {
    std::vector<float> w = p->weight.to_f32();
    lin.w.insert(lin.w.end(), w.begin(), w.end());
    if (any_bias) {
      std::vector<float> b = p->bias ? p->bias->to_f32() : std::vector<float>(p->weight.dim(0), 0.0f);
      lin.b.insert(lin.b.end(), b.begin(), b.end());
    }
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
  sgemm(pool, true, rows, lin.out, lin.in, x, ldx, lin.w.data(), lin.in, bias ? 1.0f : 0.0f, y, ldy);
}

}  // namespace mha::cpu
