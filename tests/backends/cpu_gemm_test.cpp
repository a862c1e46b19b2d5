// The cpu backend's pool-split sgemm against a plain double loop, on shapes
// that take each split (rows, columns, fewer rows than threads) and the
// degenerate k = 0 case, where BLAS itself may not touch C.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_gemm.h"

namespace mha::cpu {
namespace {

struct GemmCase {
  int64_t m, n, k;
  bool transB;
  float beta;
};

class PoolSgemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(PoolSgemm, MatchesDoubleLoop) {
  const GemmCase c = GetParam();
  std::mt19937 g(static_cast<unsigned>(c.m * 131 + c.n * 7 + c.k));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t lda = c.k + 3, ldb = (c.transB ? c.k : c.n) + 5, ldc = c.n + 2;
  std::vector<float> A(c.m * lda), Bm((c.transB ? c.n : c.k) * ldb), C(c.m * ldc);
  for (auto* v : {&A, &Bm, &C})
    for (float& x : *v) x = u(g);
  std::vector<float> C0 = C;
  ThreadPool pool(3);
  SerialBlasScope serial;
  sgemm(pool, c.transB, c.m, c.n, c.k, A.data(), lda, Bm.data(), ldb, c.beta, C.data(), ldc);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double want = c.beta == 0.0f ? 0.0 : double(c.beta) * C0[i * ldc + j];
      for (int64_t p = 0; p < c.k; ++p)
        want += double(A[i * lda + p]) * (c.transB ? Bm[j * ldb + p] : Bm[p * ldb + j]);
      ASSERT_NEAR(C[i * ldc + j], want, 1e-5 * (1 + c.k)) << "at (" << i << ", " << j << ")";
    }
    // Padding columns between rows stay untouched.
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(C[i * ldc + j], C0[i * ldc + j]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolSgemm,
                         ::testing::Values(GemmCase{97, 33, 20, true, 0.0f},    // split by rows
                                           GemmCase{97, 33, 20, false, 1.0f},
                                           GemmCase{5, 200, 17, true, 1.0f},    // by columns
                                           GemmCase{5, 200, 17, false, 0.0f},
                                           GemmCase{3, 2, 9, true, 0.0f},       // fewer rows than threads
                                           GemmCase{40, 50, 0, true, 1.0f},     // k = 0: C = beta * C
                                           GemmCase{40, 50, 0, false, 0.0f},
                                           GemmCase{9701, 24, 16, true, 1.0f}));  // many row blocks

// Rows go in calls of kRowBlock rows whatever the pool's size, so the bits
// do not depend on it. Cutting at whole 48-row tiles was not enough: with
// OpenBLAS's SkylakeX kernels a call of n * m <= 1200 elements (k >= 32)
// takes another kernel, so 100 rows cut 96 + 4 by two threads differed
// from one call in the last 4 rows (100 x 16 x 40, the shape below).
TEST(PoolSgemmRows, SameBitsForAnyPoolSize) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{100, 16, 40}, Shape{1000, 16, 40}, Shape{13000, 40, 64}}) {
    std::mt19937 g(5);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> A(s.m * s.k), W(s.n * s.k), C(s.m * s.n), C1(s.m * s.n);
    for (auto* v : {&A, &W})
      for (float& x : *v) x = u(g);
    SerialBlasScope serial;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      sgemm(pool, true, s.m, s.n, s.k, A.data(), s.k, W.data(), s.k, 0.0f, (threads == 1 ? C1 : C).data(), s.n);
      if (threads > 1) {
        ASSERT_EQ(std::memcmp(C.data(), C1.data(), sizeof(float) * s.m * s.n), 0)
            << s.m << "x" << s.n << "x" << s.k << ", " << threads << " threads";
      }
    }
  }
}

TEST(SerialBlasScope, RestoresTheThreadCount) {
  const int before = openblas_get_num_threads();
  {
    SerialBlasScope serial;
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), before);
}

}  // namespace
}  // namespace mha::cpu
