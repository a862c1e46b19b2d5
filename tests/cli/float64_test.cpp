// Issue 10: float64 weights and inputs stay float64 on the reference backend,
// end to end: its output matches torch in float64 to ~1e-15, not to float32's
// 3e-8, and is written as a float64 .npy. Float32 backends get float32 copies.
#include <gtest/gtest.h>

#include <cmath>

#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

double max_rel_err(const Tensor& got, const Tensor& want) {
  double worst = 0;
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(want.get_f64(i)));
  for (int64_t i = 0; i < want.numel(); ++i)
    worst = std::max(worst, std::fabs(got.get_f64(i) - want.get_f64(i)) / scale);
  return worst;
}

TEST(Float64, ReferenceBackendMatchesTorchFloat64) {
  TempDir dir;
  auto py = run_python(
      "import torch, numpy as np, json\n"
      "d = '" + dir.path() + "/'\n"
      "torch.manual_seed(0)\n"
      "m = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=5).double()\n"
      "q = torch.randn(5, 2, 8, dtype=torch.float64)\n"
      "k = torch.randn(7, 2, 6, dtype=torch.float64)\n"
      "v = torch.randn(7, 2, 5, dtype=torch.float64)\n"
      "np.savez(d + 'w.npz', **{n: t.detach().numpy() for n, t in m.state_dict().items()})\n"
      "for n, t in (('q', q), ('k', k), ('v', v)): np.save(d + n + '.npy', t.numpy())\n"
      "o, w = m(q, k, v)\n"
      "np.save(d + 'want.npy', o.detach().numpy())\n"
      "np.save(d + 'want_w.npy', w.detach().numpy())\n"
      "json.dump({'variant': 'torch_mha', 'params': {'embed_dim': 8, 'num_heads': 2, 'kdim': 6, 'vdim': 5},\n"
      "  'weights': {'file': 'w.npz'}, 'inputs': {'query': 'q.npy', 'key': 'k.npy', 'value': 'v.npy'},\n"
      "  'backend': 'reference'}, open(d + 'c.json', 'w'))\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  CommandResult r = run_mha("run -n 1 -c " + shell_quote(dir.file("c.json")) + " -o " + shell_quote(dir.file("o.npy")) +
                            " --attn-weights " + shell_quote(dir.file("w.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Tensor got = io::read_npy(dir.file("o.npy")), want = io::read_npy(dir.file("want.npy"));
  EXPECT_EQ(got.dtype(), DType::F64);
  EXPECT_LT(max_rel_err(got, want), 1e-14);  // float32 anywhere on the way gives ~3e-8
  Tensor gw = io::read_npy(dir.file("w.npy")), ww = io::read_npy(dir.file("want_w.npy"));
  EXPECT_EQ(gw.dtype(), DType::F64);
  EXPECT_LT(max_rel_err(gw, ww), 1e-14);

  // The cpu backend computes in float32 from float32 copies of the same data.
  r = run_mha("run -n 1 -c " + shell_quote(dir.file("c.json")) + " -b cpu -o " + shell_quote(dir.file("o32.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Tensor got32 = io::read_npy(dir.file("o32.npy"));
  EXPECT_EQ(got32.dtype(), DType::F32);
  EXPECT_LT(max_rel_err(got32, want), 1e-5);
  EXPECT_GT(max_rel_err(got32, want), 1e-12);
}

}  // namespace
}  // namespace mha::test
