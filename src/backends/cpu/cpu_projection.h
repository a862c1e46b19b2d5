#pragma once
// Linear projections as sgemm (cpu_gemm.h) on weights the plan packed once.
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_thread_pool.h"
#include "model/attention.h"

namespace mha::cpu {

// Row-major float32 weight [out, in] (applied as x . w^T) and bias [out]
// (empty: none). Several projections that read the same input are stacked
// on `out` and share one bias fill.
//
// `cols` splits the output columns into blocks, one sgemm each. Why: for an
// element of C OpenBLAS's bits depend on the call's whole shape, not only on
// the element's dot product (how the call's columns fall into the kernel's
// blocks and tiles: on this Haswell-kernel Xeon a share of a call's columns
// differed from the whole call in up to 1 element in 5, 48 columns or 512).
// The q/k/v projections are cut at every key/value group (q_g, k_g, v_g), so
// a head-parallel rank, whose weights are some whole groups, makes the very
// calls one process makes for those groups and gets its bits
// (parallel/head_parallel.h).
struct PackedLinear {
  int64_t out = 0, in = 0;
  std::vector<float> w, b;
  std::vector<int64_t> cols;  // block edges 0 < ... < out; empty: one block
};

PackedLinear pack_linear(const Projection& p);
// [Wq; Wk; Wv] on the output dim; missing biases become zeros unless all are
// missing. With `block` (one width per projection, each dividing its rows),
// every projection's rows are cut into blocks of that width (PackedLinear::cols).
PackedLinear pack_stacked(const std::vector<const Projection*>& ps, const std::vector<int64_t>& block = {});

// y[rows, lin.out] (row stride ldy) = x[rows, lin.in] (row stride ldx) . w^T + b. Bias rows
// are written first and sgemm accumulates onto them (beta = 1), which spares
// OpenBLAS its separate pass that clears C. One sgemm per column block,
// each split over the pool.
void linear(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
            int64_t ldy);

}  // namespace mha::cpu
