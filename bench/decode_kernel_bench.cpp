// mha_decode_bench: the cpu decode chunk kernel alone (one thread, no
// projections, no merge) over one KV head's cache in every cache format:
// G query heads against n keys of head width d, K and V encoded by
// kv_format.h. Thread CPU time per key, best of 7 (each 4 kernel calls), so
// the figure holds on a loaded machine: the kernel's arithmetic cost per key,
// to set against the bytes per key each format reads. The score, softmax and
// P.V columns split the same best run by pass (DecodeChunk::pass_cpu_s).
//   mha_decode_bench [n] [G] [d]      (defaults 16384 4 128: a Llama-3-8B group)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/kv_format.h"

int main(int argc, char** argv) {
  using namespace mha;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 16384, G = argc > 2 ? std::atoll(argv[2]) : 4;
  const int64_t d = argc > 3 ? std::atoll(argv[3]) : 128;
  if (n < 1 || G < 1 || d < 32 || d % 32 != 0) {
    std::fprintf(stderr, "mha_decode_bench: expected n >= 1, G >= 1, d a multiple of 32\n");
    return 2;
  }
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> q(G * d), row(d);
  for (float& e : q) e = u(g);
  const std::vector<cpu::DecodeKernel> kernels = cpu::decode_kernels();
  std::printf(
      "| isa | cache | bytes/key (K+V) | ns/key | GB/s at that rate | scores ns/key | softmax ns/key | P.V ns/key |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (cpu::DecodeKernel kern : kernels)
    for (CacheDtype dt : kAllCacheDtypes) {
      const int64_t rb = kv_row_bytes(dt, d);
      std::vector<unsigned char> k(n * rb), v(n * rb);
      for (int64_t j = 0; j < n; ++j) {
        for (float& e : row) e = u(g);
        kv_encode_row(dt, row.data(), d, k.data() + j * rb);
        for (float& e : row) e = u(g);
        kv_encode_row(dt, row.data(), d, v.data() + j * rb);
      }
      std::vector<float> s(G * n), o(G * d), m(G), l(G);
      cpu::DecodeChunk c;
      c.q = q.data(), c.k = k.data(), c.v = v.data(), c.dt = dt, c.kbytes = rb, c.vbytes = rb;
      c.j0 = 0, c.j1 = n, c.G = G, c.dh = d, c.dv = d, c.scale_log2 = 0.1f;
      c.s = s.data(), c.o = o.data(), c.m = m.data(), c.l = l.data();
      kern(c);
      double best = 1e30, pass[3] = {0, 0, 0};
      for (int r = 0; r < 7; ++r) {
        double ps[3] = {0, 0, 0};
        c.pass_cpu_s = ps;
        const double t0 = cpu::decode_thread_cpu_s();
        for (int i = 0; i < 4; ++i) kern(c);
        const double t = (cpu::decode_thread_cpu_s() - t0) / 4;
        if (t < best) best = t, pass[0] = ps[0] / 4, pass[1] = ps[1] / 4, pass[2] = ps[2] / 4;
      }
      std::printf("| %s | %s | %lld | %.1f | %.1f | %.1f | %.2f | %.1f |\n", cpu::decode_kernel_isa(kern),
                  cache_dtype_name(dt), static_cast<long long>(2 * rb), best / n * 1e9, 2.0 * n * rb / best / 1e9,
                  pass[0] / n * 1e9, pass[1] / n * 1e9, pass[2] / n * 1e9);
    }
  return 0;
}
