#pragma once
// Linear projections as sgemm (cpu_gemm.h) on weights the plan packed once.
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_thread_pool.h"
#include "model/attention.h"

namespace mha::cpu {

// Row-major float32 weight [out, in] (applied as x . w^T) and bias [out]
// (empty: none). Several projections that read the same input are stacked
// on `out` so that one GEMM computes them all.
struct PackedLinear {
  int64_t out = 0, in = 0;
  std::vector<float> w, b;
};

PackedLinear pack_linear(const Projection& p);
// [Wq; Wk; Wv] on the output dim; missing biases become zeros unless all are missing.
PackedLinear pack_stacked(const std::vector<const Projection*>& ps);

// y[rows, lin.out] (row stride ldy) = x[rows, lin.in] (row stride ldx) . w^T + b. Bias rows
// are written first and sgemm accumulates onto them (beta = 1), which spares
// OpenBLAS its separate pass that clears C. Splits the work over the pool.
void linear(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
            int64_t ldy);

}  // namespace mha::cpu
