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

// Rows per call of the pool variant below and of the grouped projections
// (cpu_projection.h): a logical GEMM's rows go in calls over rows
// [i * kRowBlock, (i + 1) * kRowBlock), whatever the pool's size, so the
// calls, and with them the bits, depend on the shape alone. Splitting at
// whole micro-kernel tiles is not enough: OpenBLAS may route calls of
// another size down another path. With SkylakeX kernels (0.3.21), a call
// with n * m <= 1200 output elements and k >= 32 takes the "small matrix"
// kernel, whose bits differ from the packed kernel's, so a 100-row call and
// the same rows cut 96 + 4 (two threads) differed in the last 4 rows, where
// Haswell kernels agree. 192: a multiple of every row tile OpenBLAS uses
// (4, 6, 8, 12, 16, 24, hence of 48) and of kBr (cpu_flash.h), so query
// chunks are whole blocks (ChunkPolicy); fewer rows per call repack the
// weights too often (about 8% slower than 384-row calls on the 3072x1024
// QKV weights, measured), more would leave threads idle on 768-row groups.
constexpr int64_t kRowBlock = 192;

// The same, cut into calls of kRowBlock rows (row blocks) run over the pool,
// or, when C has fewer rows than columns (single-token queries), into column
// blocks of a fixed 256 columns. Each call packs its own copy of the shared
// operand; for the projection shapes this is a few % of the multiply. Both
// cuts depend on the shape only: the bits are the same whatever the pool
// size (tests/backends/determinism_test.cpp).
void sgemm(ThreadPool& pool, bool transB, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace mha::cpu
