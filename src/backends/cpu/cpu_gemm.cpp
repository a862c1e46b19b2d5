#include "backends/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace mha::cpu {

SerialBlasScope::SerialBlasScope() : previous_(openblas_get_num_threads()) { openblas_set_num_threads(1); }

SerialBlasScope::~SerialBlasScope() { openblas_set_num_threads(previous_); }

void warm_blas_buffers(ThreadPool& pool) {
  constexpr int64_t m = 8, n = 4096, k = 384;
  SerialBlasScope serial;
  // OpenBLAS lends a buffer per call in flight, so the calls must overlap:
  // each task waits until every thread holds one (a thread that claimed a
  // task cannot claim another, so this cannot wait forever).
  std::atomic<int> started{0};
  const std::vector<float> a(m * k, 0.0f), b(k * n, 0.0f);  // read-only, shared
  pool.parallel_for(pool.size(), [&](int64_t, int) {
    std::vector<float> c(m * n);
    started.fetch_add(1);
    while (started.load() < pool.size()) std::this_thread::yield();
    sgemm(false, m, n, k, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  });
}

void sgemm(bool transB, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
           float beta, float* C, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS may leave C untouched here; the result is beta * C
    for (int64_t i = 0; i < m; ++i)
      if (beta == 0.0f)
        std::memset(C + i * ldc, 0, sizeof(float) * n);
      else
        for (int64_t j = 0; j < n; ++j) C[i * ldc + j] *= beta;
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, A, static_cast<blasint>(lda), B,
              static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

void sgemm(ThreadPool& pool, bool transB, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // Columns: an element's bits depend on how the call's columns fall into
  // OpenBLAS's blocks (cpu_projection.h), so column blocks have a fixed
  // width (a 100-row output projection 128 wide differed between 1 and 2
  // threads when cut in halves). Rows: fixed blocks too (kRowBlock says why).
  constexpr int64_t kColBlock = 256;
  const bool by_rows = m >= n;
  const int64_t step = by_rows ? kRowBlock : kColBlock, extent = by_rows ? m : n;
  pool.parallel_for((extent + step - 1) / step, [&](int64_t t, int) {
    const int64_t lo = t * step, len = std::min(step, extent - lo);
    if (by_rows)
      sgemm(transB, len, n, k, A + lo * lda, lda, B, ldb, beta, C + lo * ldc, ldc);
    else
      sgemm(transB, m, len, k, A, lda, transB ? B + lo * ldb : B + lo, ldb, beta, C + lo, ldc);
  });
}

}  // namespace mha::cpu
