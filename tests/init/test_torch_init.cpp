// Seed modules' initial weights against PyTorch 1.13, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "init/torch_init.h"
#include "variants/module_init.h"
#include "init/torch_oracle.h"
#include "util/error.h"

namespace mha::test {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

NamedTensors renamed(NamedTensors ts, const std::vector<std::pair<std::string, std::string>>& prefixes) {
  for (auto& [name, t] : ts)
    for (const auto& [from, to] : prefixes)
      if (name.compare(0, from.size(), from) == 0) {
        name = to + name.substr(from.size());
        break;
      }
  return ts;
}

TEST(TorchInit, LinearMatchesTorch) {
  struct C { int64_t in, out; bool bias; uint64_t seed; };
  const std::vector<C> cs = {{3, 2, false, 123}, {3, 2, true, 123}, {1, 1, true, 0},     {0, 4, true, 1},
                             {4, 0, true, 2},    {5, 17, true, 3},  {64, 64, true, 4},   {768, 768, true, 5},
                             {1000, 3, true, 6}, {7, 33, false, 7}, {13, 1, true, 8}};
  std::string body = "import warnings\nwarnings.simplefilter('ignore')\n";
  for (std::size_t i = 0; i < cs.size(); ++i)
    body += "torch.manual_seed(" + std::to_string(cs[i].seed) + "); m = nn.Linear(" + s(cs[i].in) + ", " +
            s(cs[i].out) + ", bias=" + py(cs[i].bias) + "); dump('l" + std::to_string(i) +
            "', sd(m) + [('next', torch.rand(3))])\n";
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    TorchGenerator g(cs[i].seed);
    NamedTensors got = init_linear(g, cs[i].in, cs[i].out, cs[i].bias);
    got.emplace_back("next", g.rand({3}));  // the draws consumed are torch's too
    EXPECT_TRUE(same_bits(got, oracle.at("l" + std::to_string(i)))) << "case " << i;
  }
}

TEST(TorchInit, BookModulesMatchTorch) {
  struct C { int64_t d_in, d_out, heads; bool bias; uint64_t seed; };
  const std::vector<C> cs = {{3, 2, 2, false, 123}, {3, 2, 2, true, 123}, {6, 6, 3, true, 1},
                             {64, 32, 4, true, 2},  {16, 8, 4, false, 3}, {512, 512, 8, false, 4}};
  std::string body;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    const std::string args = s(c.d_in) + ", " + s(c.d_out) + ", 6, 0.0";
    const std::string seed = "torch.manual_seed(" + std::to_string(c.seed) + "); ";
    const std::string k = std::to_string(i);
    body += seed + "dump('ca" + k + "', sd(CausalAttention(" + args + ", " + py(c.bias) + ")))\n";
    body += seed + "dump('wr" + k + "', sd(MultiHeadAttentionWrapper(" + args + ", " + s(c.heads) + ", " +
            py(c.bias) + ")))\n";
    body += seed + "dump('bk" + k + "', sd(MultiHeadAttention(" + args + ", " + s(c.heads) + ", " + py(c.bias) +
            ")))\n";
    body += seed + "dump('ca3_" + k + "', [kv for kv in sd(CausalAttention003(" + args + ", " + py(c.bias) +
            ")) if kv[0] != 'mask'])\n";
    body += seed + "dump('bk3_" + k + "', [kv for kv in sd(MultiHeadAttention003(" + args + ", " + s(c.heads) +
            ", " + py(c.bias) + ")) if kv[0] != 'mask'])\n";
  }
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    const std::string k = std::to_string(i);
    TorchGenerator g(c.seed);
    const NamedTensors ca = init_causal_attention(g, c.d_in, c.d_out, c.bias);
    EXPECT_TRUE(same_bits(ca, oracle.at("ca" + k))) << "CausalAttention case " << i;
    EXPECT_TRUE(same_bits(renamed(ca, {{"W_query.", "W_q."}, {"W_key.", "W_k."}, {"W_value.", "W_v."}}),
                          oracle.at("ca3_" + k)))
        << "seed 003 CausalAttention case " << i;
    g.manual_seed(c.seed);
    EXPECT_TRUE(same_bits(init_mha_wrapper(g, c.d_in, c.d_out, c.heads, c.bias), oracle.at("wr" + k)))
        << "MultiHeadAttentionWrapper case " << i;
    g.manual_seed(c.seed);
    const NamedTensors bk = init_book_mha(g, c.d_in, c.d_out, c.heads, c.bias);
    EXPECT_TRUE(same_bits(bk, oracle.at("bk" + k))) << "book MultiHeadAttention case " << i;
    EXPECT_TRUE(same_bits(renamed(bk, {{"out_proj.", "output_projection."}}), oracle.at("bk3_" + k)))
        << "seed 003 MultiHeadAttention case " << i;
  }
}

TEST(TorchInit, Seed001ModulesMatchTorch) {
  const std::vector<std::pair<int64_t, int64_t>> cs = {{12, 3}, {4, 2}, {64, 8}, {1024, 16}, {5, 5}};
  std::string body;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const std::string args = s(cs[i].first) + ", " + s(cs[i].second), k = std::to_string(i);
    body += "torch.manual_seed(" + k + "); dump('m" + k + "', sd(MultiHeadAttention001(" + args + ")))\n";
    body += "torch.manual_seed(" + k + "); dump('v" + k + "', sd(MultiHeadAttentionV2(" + args + ")))\n";
  }
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    TorchGenerator g(i);
    EXPECT_TRUE(same_bits(init_mha_001(g, cs[i].first, cs[i].second), oracle.at("m" + std::to_string(i))))
        << "case " << i;
    g.manual_seed(i);
    EXPECT_TRUE(same_bits(init_mha_v2_001(g, cs[i].first, cs[i].second), oracle.at("v" + std::to_string(i))))
        << "case " << i;
  }
}

TEST(TorchInit, TorchMultiheadAttentionMatchesTorch) {
  // bias_k / bias_v of embed_dim < 16 take the cached double normal path,
  // >= 16 the vectorised one; kdim/vdim != embed_dim split the in-projection.
  const std::vector<TorchMhaParams> cs = {
      {4, 2, false, false, -1, -1},  {4, 2, true, false, -1, -1},  {8, 2, true, true, -1, -1},
      {8, 2, false, true, -1, -1},   {15, 3, true, true, -1, -1},  {16, 4, true, true, -1, -1},
      {24, 3, true, true, -1, -1},   {64, 8, false, true, -1, -1}, {8, 2, true, false, 3, 5},
      {32, 4, true, true, 16, 32},   {20, 5, false, true, 7, 9},   {12, 4, true, true, 12, 40},
      {1024, 16, true, true, -1, -1}};
  std::string body;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const auto& c = cs[i];
    auto dim = [](int64_t d) { return d < 0 ? std::string("None") : std::to_string(d); };
    body += "torch.manual_seed(" + std::to_string(i + 10) + "); m = nn.MultiheadAttention(" + s(c.embed_dim) +
            ", " + s(c.num_heads) + ", bias=" + py(c.bias) + ", add_bias_kv=" + py(c.add_bias_kv) +
            ", kdim=" + dim(c.kdim) + ", vdim=" + dim(c.vdim) + "); dump('t" + std::to_string(i) +
            "', sd(m) + [('next', torch.randn(5))])\n";
  }
  auto oracle = run_torch_oracle(body);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    TorchGenerator g(i + 10);
    NamedTensors got = init_torch_mha(g, cs[i]);
    got.emplace_back("next", g.randn({5}));  // includes any cached normal left behind
    EXPECT_TRUE(same_bits(got, oracle.at("t" + std::to_string(i)))) << "case " << i;
  }
}

TEST(TorchInit, TtnnWeightsMatchTorch) {
  std::string body;
  for (int64_t h : {4, 64, 96}) {
    body += "torch.manual_seed(" + s(h) + ")\nls = [nn.Linear(" + s(h) + ", " + s(h) + ") for _ in range(4)]\n";
    body += "dump('t" + s(h) + "', [(n + suf, (l.weight.t() if suf == '_weight' else l.bias)) for n, l in "
            "zip(['query', 'key', 'value', 'output'], ls) for suf in ['_weight', '_bias']])\n";
    body += "torch.manual_seed(" + s(h) + ")\ndump('r" + s(h) + "', [(n + suf, torch.rand((" + s(h) + ", " + s(h) +
            ")) if suf == '_weight' else torch.rand((" + s(h) + ",))) for n in ['query', 'key', 'value', "
            "'output'] for suf in ['_weight', '_bias']])\n";
  }
  auto oracle = run_torch_oracle(body);
  for (int64_t h : {4, 64, 96}) {
    TorchGenerator g(h);
    EXPECT_TRUE(same_bits(init_ttnn_torch(g, h), oracle.at("t" + s(h)))) << "hidden " << h;
    g.manual_seed(h);
    EXPECT_TRUE(same_bits(init_ttnn_rand(g, h), oracle.at("r" + s(h)))) << "hidden " << h;
  }
}

TEST(TorchInit, FuseTtnnQkvConcatenatesOnLastDim) {
  TorchGenerator g(3);
  const NamedTensors w = init_ttnn_rand(g, 4);
  const NamedTensors f = fuse_ttnn_qkv(w);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].first, "fused_qkv_weight");
  EXPECT_EQ(f[0].second.shape(), (Shape{4, 12}));
  EXPECT_EQ(f[1].second.shape(), (Shape{12}));
  const float* fw = f[0].second.data<float>();
  for (int part = 0; part < 3; ++part)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(fw[r * 12 + part * 4 + c], w[2 * part].second.data<float>()[r * 4 + c]);
  EXPECT_EQ(f[1].second.data<float>()[5], w[3].second.data<float>()[1]);
  EXPECT_EQ(f[2].first, "self_output_weight");
  EXPECT_EQ(f[3].first, "self_output_bias");
}

// Seed 004 prints these for torch.manual_seed(1) + nn.MultiheadAttention(4, 2, bias=False).
TEST(TorchInit, Seed004PrintedWeights) {
  TorchGenerator g(1);
  const NamedTensors w = init_torch_mha(g, {4, 2, false, false, -1, -1});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].first, "in_proj_weight");
  EXPECT_EQ(w[1].first, "out_proj.weight");
  const std::vector<float> in_proj = {0.0888f,  -0.0024f, 0.5353f,  0.1906f,  -0.2281f, -0.3698f, -0.1026f, -0.2641f,
                                      -0.1962f, 0.0293f,  0.3651f,  0.3328f,  -0.5986f, 0.3796f,  0.1711f,  0.5809f,
                                      0.4042f,  -0.5580f, -0.5822f, -0.2954f, 0.5377f,  -0.1020f, 0.2621f,  -0.2846f,
                                      0.6009f,  -0.2591f, 0.4592f,  0.0073f,  -0.3226f, 0.3148f,  -0.3251f, 0.1801f,
                                      -0.1768f, -0.0671f, -0.5887f, -0.2920f, 0.3323f,  -0.1489f, 0.6100f,  0.4909f,
                                      -0.0287f, -0.4087f, 0.3729f,  0.1901f,  -0.3958f, 0.3978f,  0.3718f,  0.5431f};
  ASSERT_EQ(w[0].second.shape(), (Shape{12, 4}));
  for (std::size_t i = 0; i < in_proj.size(); ++i)
    EXPECT_NEAR(w[0].second.data<float>()[i], in_proj[i], 5e-5) << "in_proj_weight flat " << i;
  const std::vector<float> out_row0 = {0.2576f, -0.2207f, -0.0969f, 0.2347f}, out_row1 = {-0.4707f, 0.2999f, -0.1029f,
                                                                                         0.2544f};
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(w[1].second.data<float>()[c], out_row0[c], 5e-5);
    EXPECT_NEAR(w[1].second.data<float>()[4 + c], out_row1[c], 5e-5);
  }
}

TEST(TorchInit, BadSizesAreInputErrors) {
  TorchGenerator g(0);
  EXPECT_THROW(init_linear(g, -1, 2, true), InputError);
  EXPECT_THROW(init_mha_001(g, 10, 3), InputError);
  EXPECT_THROW(init_mha_v2_001(g, 8, 0), InputError);
  EXPECT_THROW(init_torch_mha(g, {6, 4, true, false, -1, -1}), InputError);
  EXPECT_THROW(init_ttnn_rand(g, -4), InputError);
}

TEST(TorchInit, SameBitsSeesOneUlp) {
  TorchGenerator g(0);
  Tensor t = g.rand({4});
  OracleCase want = {{"x", {4}, t.to_f32()}};
  EXPECT_TRUE(same_bits({{"x", t}}, want));
  want[0].values[2] = std::nextafter(want[0].values[2], 2.0f);
  EXPECT_FALSE(same_bits({{"x", t}}, want));
}

}  // namespace
}  // namespace mha::test
