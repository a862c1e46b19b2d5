#pragma once
// sgemm for the cpu backend: OpenBLAS single-threaded, parallelised by the
// backend's own pool.
//
// Why not OpenBLAS's threads: after each call its workers spin-wait (up to
// 2^28 cycles, ~0.1 s) for more work, and the flash kernel that follows the
// QKV GEMM runs on the pool meanwhile, so a spinning worker sharing a core
// with a pool thread can double the attention step and makes first runs
// erratic (docs/BENCHMARKS.md, "First run against cached runs"). With one set of
// threads for everything, nothing spins while the pool works.
#include <cstdint>

#include "backends/cpu/cpu_thread_pool.h"

namespace mha::cpu {

// Makes OpenBLAS run on its calling thread for as long as it lives, and
// restores the process's previous thread count after (other users of BLAS,
// such as the sgemm probe or tt-sim, keep theirs).
class SerialBlasScope {
 public:
  SerialBlasScope();
  ~SerialBlasScope();
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  int previous_;
};

// Has every pool thread make one concurrent sgemm (shaped to fill a packing
// panel: 384 deep, 4096 wide) so that OpenBLAS maps and touches a packing
// buffer for each now, once per backend, and not inside whichever plan runs
// first: where fresh pages are dear (a VM that hands freed memory back to
// its host pays a host fault per page), faulting the buffer in during the
// first plan made first runs markedly slower than cached ones
// (docs/BENCHMARKS.md, "First run against cached runs"). It costs a few ms and
// about 6 MiB of resident buffer per thread, once per backend.
void warm_blas_buffers(ThreadPool& pool);

// C[m, n] (row stride ldc) = A[m, k] . op(B) + beta * C, row-major, where
// op(B) is B[k, n] or, with transB, the transpose of B[n, k]. Runs on the
// calling thread only (inside pool tasks).
void sgemm(bool transB, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
           float beta, float* C, int64_t ldc);

// Where the pool variant below cuts rows (kRowAlign: why 48) and the most
// rows one OpenBLAS call gets (kMaxCallRows: its resident buffer).
constexpr int64_t kRowAlign = 48;
constexpr int64_t kMaxCallRows = 64 * kRowAlign;

// The same, split into one block of C per pool thread (row blocks), or,
// when C has fewer rows than columns (single-token queries), into column
// blocks of a fixed 256 columns. Each thread packs its own copy of the
// shared operand; for the projection shapes this is well under 1% of the
// multiply. Row block edges fall on whole micro-kernel tiles, so the result
// is bitwise that of one call; column blocks do not depend on the pool: the
// bits are the same whatever the pool size
// (tests/backends/determinism_test.cpp). Long row ranges go in calls of at
// most 3072 rows (bounds OpenBLAS's resident buffer).
void sgemm(ThreadPool& pool, bool transB, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace mha::cpu
