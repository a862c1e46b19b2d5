// The evidence for the SIMD layer's choice of library (README, "One SIMD
// layer"): the softmax's exp2 (src/vec/exp2.h) written once more with
// Google Highway (libhwy 1.0.3) and its dynamic dispatch, against the
// project's own lane types, on the same inputs: are the bits the same, and
// what does each cost per element? Prints one markdown row per instance.
//   mha_exp2_lanes_bench [reps]
#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "exp2_lanes_bench.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha_hwy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// vec/exp2.h's polynomial, op for op.
void Exp2(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t w = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; i += w) {
    const auto v = hn::Max(hn::LoadU(d, x + i), hn::Set(d, -127.0f));
    const auto k = hn::Round(v);
    const auto f = hn::Sub(v, k);
    auto p = hn::Set(d, 1.5337577497120947e-4f);
    p = hn::MulAdd(p, f, hn::Set(d, 1.3399861054494977e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 9.618519805371761e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 5.550329014658928e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.4022646248340607e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.931471824645996e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
    const auto e = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, k), hn::Set(di, 127)));
    hn::StoreU(hn::Mul(p, hn::BitCast(d, e)), d, y + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha_hwy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "exp2_lanes.h"
#include "vec/isa.h"

namespace mha_hwy {
HWY_EXPORT(Exp2);
}  // namespace mha_hwy

namespace {

using Fn = void (*)(const float*, float*, int64_t);

double thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e9 * static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec);
}

// Median thread CPU ns per element over `reps` passes of `blocks` calls on
// n floats (in L1): CPU time, so that the figure holds on a loaded machine.
double ns_per_element(Fn fn, const float* x, float* y, int64_t n, int reps) {
  std::vector<double> t;
  const int blocks = 2000;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_ns();
    for (int b = 0; b < blocks; ++b) fn(x, y, n);
    t.push_back((thread_cpu_ns() - t0) / (double(blocks) * n));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void hwy_dispatched(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(mha_hwy::Exp2)(x, y, n); }

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const int64_t n = 4096;
  std::vector<float> x(n), want(n), got(n);
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-130.0f, 0.0f);
  for (float& e : x) e = u(g);
  x[0] = -__builtin_inff(), x[1] = 0.0f, x[2] = -0.5f, x[3] = -126.5f;
  mha::bench::exp2_lanes_avx2(x.data(), want.data(), n);

  struct Row {
    const char* name;
    Fn fn;
    bool runs;
  };
  const bool avx512 = mha::vec::cpu_supports(mha::vec::Isa::Avx512);
  const Row rows[] = {
      {"mha vec::F32x8 (avx2)", mha::bench::exp2_lanes_avx2, true},
      {"mha vec::F32x16 (avx512)", mha::bench::exp2_lanes_avx512, avx512},
      {"highway N_AVX2::Exp2", mha_hwy::N_AVX2::Exp2, true},
      {"highway N_AVX3::Exp2", mha_hwy::N_AVX3::Exp2, avx512},
      {"highway HWY_DYNAMIC_DISPATCH", hwy_dispatched, true},
  };
  std::printf("| instance | ns/element (median of %d) | bits equal to F32x8 |\n|---|---|---|\n", reps);
  for (const Row& r : rows) {
    if (!r.runs) continue;
    std::fill(got.begin(), got.end(), 1.0f);
    r.fn(x.data(), got.data(), n);
    const bool same = std::memcmp(got.data(), want.data(), sizeof(float) * n) == 0;
    std::printf("| %s | %.4f | %s |\n", r.name, ns_per_element(r.fn, x.data(), got.data(), n, reps), same ? "yes" : "NO");
  }
  return 0;
}
#endif  // HWY_ONCE
