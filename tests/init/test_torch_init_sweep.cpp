// Many fresh seeds and odd shapes, so that no size class of the uniform and
// normal paths escapes the bit-for-bit comparison with torch.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "init/torch_init.h"
#include "variants/module_init.h"
#include "init/torch_oracle.h"

namespace mha::test {
namespace {

TEST(TorchInitSweep, RandomMultiheadAttentionShapes) {
  std::mt19937 pick(2024);
  struct C { uint64_t seed; TorchMhaParams p; };
  std::vector<C> cs;
  for (int i = 0; i < 40; ++i) {
    const int64_t heads = 1 + pick() % 6, e = heads * (1 + pick() % 12);
    const bool split = pick() % 3 == 0;
    cs.push_back({pick(), {e, heads, pick() % 2 == 0, pick() % 3 != 0, split ? int64_t(1 + pick() % 40) : -1,
                           split ? int64_t(1 + pick() % 40) : -1}});
  }
  std::string body;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& p = cs[i].p;
    auto dim = [](int64_t d) { return d < 0 ? std::string("None") : std::to_string(d); };
    body += "torch.manual_seed(" + std::to_string(cs[i].seed) + "); m = nn.MultiheadAttention(" +
            std::to_string(p.embed_dim) + ", " + std::to_string(p.num_heads) + ", bias=" + py(p.bias) +
            ", add_bias_kv=" + py(p.add_bias_kv) + ", kdim=" + dim(p.kdim) + ", vdim=" + dim(p.vdim) +
            "); dump('t" + std::to_string(i) + "', sd(m) + [('next', torch.randn(3))])\n";
  }
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    TorchGenerator g(cs[i].seed);
    NamedTensors got = init_torch_mha(g, cs[i].p);
    got.emplace_back("next", g.randn({3}));
    EXPECT_TRUE(same_bits(got, oracle.at("t" + std::to_string(i))))
        << "seed " << cs[i].seed << " embed_dim " << cs[i].p.embed_dim << " heads " << cs[i].p.num_heads;
  }
}

TEST(TorchInitSweep, RandomLinearShapes) {
  std::mt19937 pick(77);
  struct C { uint64_t seed; int64_t in, out; bool bias; };
  std::vector<C> cs;
  for (int i = 0; i < 60; ++i) cs.push_back({pick(), int64_t(1 + pick() % 300), int64_t(1 + pick() % 50), pick() % 4 != 0});
  std::string body;
  for (std::size_t i = 0; i < cs.size(); ++i)
    body += "torch.manual_seed(" + std::to_string(cs[i].seed) + "); dump('l" + std::to_string(i) +
            "', sd(nn.Linear(" + std::to_string(cs[i].in) + ", " + std::to_string(cs[i].out) +
            ", bias=" + py(cs[i].bias) + ")))\n";
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    TorchGenerator g(cs[i].seed);
    EXPECT_TRUE(same_bits(init_linear(g, cs[i].in, cs[i].out, cs[i].bias), oracle.at("l" + std::to_string(i))))
        << "seed " << cs[i].seed << " in " << cs[i].in << " out " << cs[i].out;
  }
}

}  // namespace
}  // namespace mha::test
