// torch.rand / torch.randn / uniform_ / normal_ against PyTorch, bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "init/torch_generator.h"
#include "init/torch_oracle.h"

namespace mha::test {
namespace {

const std::vector<uint64_t> kSeeds = {0, 1, 123, 987654321, (uint64_t{1} << 32) + 5, ~uint64_t{0}};

std::string py_seed(uint64_t s) { return std::to_string(s); }

// Sizes around the 16-value block of the vectorised normal path.
const std::vector<int64_t> kSizes = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 47, 48, 100, 1023, 4096, 100003};

TEST(TorchGenerator, RandMatchesTorch) {
  std::string body;
  for (uint64_t s : kSeeds)
    for (int64_t n : kSizes)
      body += "torch.manual_seed(" + py_seed(s) + "); dump('r" + std::to_string(s) + "_" + std::to_string(n) +
              "', [('x', torch.rand(" + std::to_string(n) + "))])\n";
  body += "torch.manual_seed(7); dump('r3d', [('x', torch.rand(3, 5, 7))])\n";
  auto oracle = run_torch_oracle(body);
  for (uint64_t s : kSeeds)
    for (int64_t n : kSizes) {
      TorchGenerator g(s);
      EXPECT_TRUE(same_bits({{"x", g.rand({n})}}, oracle.at("r" + std::to_string(s) + "_" + std::to_string(n))))
          << "seed " << s << " n " << n;
    }
  TorchGenerator g(7);
  EXPECT_TRUE(same_bits({{"x", g.rand({3, 5, 7})}}, oracle.at("r3d")));
}

TEST(TorchGenerator, RandnMatchesTorch) {
  std::string body;
  for (uint64_t s : kSeeds)
    for (int64_t n : kSizes)
      body += "torch.manual_seed(" + py_seed(s) + "); dump('n" + std::to_string(s) + "_" + std::to_string(n) +
              "', [('x', torch.randn(" + std::to_string(n) + "))])\n";
  auto oracle = run_torch_oracle(body);
  for (uint64_t s : kSeeds)
    for (int64_t n : kSizes) {
      TorchGenerator g(s);
      EXPECT_TRUE(same_bits({{"x", g.randn({n})}}, oracle.at("n" + std::to_string(s) + "_" + std::to_string(n))))
          << "seed " << s << " n " << n;
    }
}

// The small path keeps the second Box-Muller value in the generator for the
// next small normal_; the large path and uniform fills leave it alone.
TEST(TorchGenerator, NormalCacheCarriesAcrossCalls) {
  const std::vector<std::pair<char, int64_t>> calls = {{'n', 3}, {'n', 5}, {'u', 4}, {'n', 1}, {'n', 20},
                                                       {'n', 7}, {'u', 1}, {'n', 2}, {'n', 33}, {'n', 1}};
  std::string body;
  for (uint64_t s : {0ull, 42ull, 2024ull}) {
    body += "torch.manual_seed(" + std::to_string(s) + ")\nxs = []\n";
    for (auto [k, n] : calls)
      body += std::string("xs.append(('x', torch.") + (k == 'n' ? "randn(" : "rand(") + std::to_string(n) + ")))\n";
    body += "dump('chain" + std::to_string(s) + "', xs)\n";
  }
  auto oracle = run_torch_oracle(body);
  for (uint64_t s : {0ull, 42ull, 2024ull}) {
    TorchGenerator g(s);
    NamedTensors got;
    for (auto [k, n] : calls) got.emplace_back("x", k == 'n' ? g.randn({n}) : g.rand({n}));
    EXPECT_TRUE(same_bits(got, oracle.at("chain" + std::to_string(s)))) << "seed " << s;
  }
}

TEST(TorchGenerator, ReseedDropsNormalCache) {
  auto oracle = run_torch_oracle(
      "torch.manual_seed(5); torch.randn(1); torch.manual_seed(5); dump('c', [('x', torch.randn(3))])\n");
  TorchGenerator g(5);
  g.randn({1});
  g.manual_seed(5);
  EXPECT_TRUE(same_bits({{"x", g.randn({3})}}, oracle.at("c")));
}

TEST(TorchGenerator, UniformAndNormalWithParameters) {
  struct P { int64_t n; double a, b; };
  const std::vector<P> ps = {{5, -0.53, -0.31}, {40, 1.4, 4.7}, {257, -0.25, 0.25}, {7, 0.3, 0.7},
                             {16, 0.3, 0.7},    {50, -2.0, 1.5}, {1000, 1e-3, 3.0}};
  std::string body;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::string n = std::to_string(ps[i].n), a = std::to_string(ps[i].a), b = std::to_string(ps[i].b);
    body += "torch.manual_seed(" + std::to_string(i) + "); dump('u" + std::to_string(i) + "', [('x', torch.empty(" +
            n + ").uniform_(" + a + ", " + b + "))])\n";
    body += "torch.manual_seed(" + std::to_string(i) + "); dump('g" + std::to_string(i) + "', [('x', torch.empty(" +
            n + ").normal_(" + a + ", " + std::to_string(ps[i].b < 0 ? -ps[i].b : ps[i].b) + "))])\n";
  }
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const double a = std::stod(std::to_string(ps[i].a)), b = std::stod(std::to_string(ps[i].b));
    TorchGenerator g(i);
    Tensor u(DType::F32, {ps[i].n});
    g.uniform_(u.data<float>(), u.numel(), a, b);
    EXPECT_TRUE(same_bits({{"x", u}}, oracle.at("u" + std::to_string(i)))) << "uniform case " << i;
    g.manual_seed(i);
    Tensor n(DType::F32, {ps[i].n});
    g.normal_(n.data<float>(), n.numel(), a, b < 0 ? -b : b);
    EXPECT_TRUE(same_bits({{"x", n}}, oracle.at("g" + std::to_string(i)))) << "normal case " << i;
  }
}

TEST(TorchGenerator, Random64TakesHighHalfFirst) {
  TorchGenerator a(9), b(9);
  const uint64_t hi = b.random(), lo = b.random();
  EXPECT_EQ(a.random64(), (hi << 32) | lo);
}

}  // namespace
}  // namespace mha::test
