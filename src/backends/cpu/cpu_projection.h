#pragma once
// Linear projections as sgemm (cpu_gemm.h) on weights the plan packed once.
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_thread_pool.h"
#include "model/attention.h"

namespace mha::cpu {

// Row-major float32 weight [out, in] (applied as x . w^T) and bias [out]
// (empty: none). Several projections that read the same input are stacked
// on `out` and share one GEMM.
//
// Grouped (block widths given to pack_stacked): the projections' rows are
// packed group by group, [Wq_0; Wk_0; Wv_0; Wq_1; ...] (the q, k and v rows
// of one key/value group), and linear() makes one sgemm per group, whose
// columns it puts back in [q | k | v] order. Why: OpenBLAS rounds an element
// of C by the call's whole shape, not only by its dot product (how the
// call's columns fall into the kernel's blocks and tiles: on this
// Haswell-kernel Xeon a share of a call's columns differed from the whole
// call in up to 1 element in 5, at 48 columns or 512). A head-parallel rank
// holds whole groups, so it makes the very calls one process makes for them
// and gets their bits (parallel/head_parallel.h).
struct PackedLinear {
  int64_t out = 0, in = 0;
  std::vector<float> w, b;      // packed order (group by group when grouped)
  std::vector<int64_t> rows;    // each projection's rows, in order
  std::vector<int64_t> block;   // grouped: each projection's rows per group; empty: not grouped
  int64_t groups() const { return block.empty() ? 1 : rows.front() / block.front(); }
  int64_t group_width() const;  // packed rows (output columns) per group
};

PackedLinear pack_linear(const Projection& p);
// [Wq; Wk; Wv] on the output dim; missing biases become zeros unless all are
// missing. With `block` (one width per projection, each dividing its rows
// into the same number of groups), grouped as above.
PackedLinear pack_stacked(const std::vector<const Projection*>& ps, const std::vector<int64_t>& block = {});

// y[rows, lin.out] (row stride ldy, columns in stacked order) =
// x[rows, lin.in] (row stride ldx) . w^T + b. Bias rows are written first and
// sgemm accumulates onto them (beta = 1), which spares OpenBLAS its separate
// pass that clears C. Split over the pool by rows; grouped: one sgemm per
// group and row block, into a per-thread buffer that is then copied into
// place (a group of one projection goes straight into y).
void linear(ThreadPool& pool, const PackedLinear& lin, const float* x, int64_t ldx, int64_t rows, float* y,
            int64_t ldy);

}  // namespace mha::cpu
