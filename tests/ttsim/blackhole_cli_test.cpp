// --device blackhole end to end: `mha op` runs Blackhole's arithmetic (the
// SFPU reciprocal, softmax's exp / reduce / reciprocal / multiply, the
// matrix unit's adder), bit for bit as the core computes it with
// Arch::Blackhole, and --json reports the arch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/packer.h"
#include "ttsim/sfpu.h"
#include "ttsim/tile.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {


int64_t differing(const Tensor& a, const std::vector<float>& b) {
  const std::vector<float> av = a.to_f32();
  if (av.size() != b.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < av.size(); ++i) n += std::memcmp(&av[i], &b[i], 4) != 0;
  return n;
}

struct BlackholeOpRun {
  TempDir dir;
  std::string in(const std::string& name, const Tensor& t) {
    io::write_npy(dir.file(name), t);
    return shell_quote(dir.file(name));
  }
  Tensor run(const std::string& args, nlohmann::json* report = nullptr) {
    CommandResult r = run_mha("op " + args + " -o " + shell_quote(dir.file("out.npy")) + (report ? " --json -" : ""));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (report) *report = nlohmann::json::parse(r.out);
    return io::read_tensor(dir.file("out.npy"));
  }
};

}  // namespace

TEST(BlackholeCli, ReciprocalAndSoftmaxRunBlackholesArithmetic) {
  BlackholeOpRun r;
  const Tensor p = randn({2, 20, 50}, 21, 1.0f, 3.0f), a = randn({2, 20, 50}, 22, 2.0f);
  const std::string ip = r.in("p.npy", p), ia = r.in("a.npy", a);
  nlohmann::json j;
  for (bool approx : {true, false}) {
    for (bool fp32 : {false, true}) {
      const std::string flags = std::string(" --math-approx-mode=") + (approx ? "true" : "false") +
                                " --fp32-dest-acc-en=" + (fp32 ? "true" : "false");
      const std::vector<float> in = to_row_major(to_tile_layout(p, DataFormat::Bfloat16));
      std::vector<float> bh(in.size()), wh(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const float db = sfpu_reciprocal(in[i], approx, fp32, Arch::Blackhole);
        const float dw = sfpu_reciprocal(in[i], approx, fp32, Arch::Wormhole);
        pack_from_dst(&db, &bh[i], 1, DataFormat::Bfloat16, fp32, false);
        pack_from_dst(&dw, &wh[i], 1, DataFormat::Bfloat16, fp32, false);
      }
      const Tensor got = r.run("reciprocal " + ip + flags + " --device blackhole", &j);
      EXPECT_EQ(j["arch"], "blackhole");
      EXPECT_EQ(j["attributes"]["arch"], "blackhole");  // a derived field of the op's compute config
      EXPECT_EQ(differing(got, bh), 0) << flags;
      // Approx mode is SFPARECIP's bare 7-bit estimate on Blackhole, a
      // quadratic estimate and a Newton step on Wormhole: they differ. (With
      // Newton steps both usually round alike.)
      if (approx) {
        EXPECT_GT(differing(r.run("reciprocal " + ip + flags), bh), 0) << flags;
      }
      EXPECT_EQ(differing(r.run("reciprocal " + ip + flags, &j), wh), 0);
      EXPECT_EQ(j["arch"], "wormhole");
      EXPECT_EQ(j["attributes"]["arch"], "wormhole");
    }
  }
  ComputeConfig c = softmax_default_config();
  c.arch = Arch::Blackhole;
  c.tt_metal = TtMetal::Latest;  // the quadratic reciprocal, whose approx mode is SFPARECIP's bare estimate
  c.fp32_dest_acc_en = true;
  c.output = DataFormat::Float32;
  TileTensor want;
  tt_softmax(to_tile_layout(a, DataFormat::Bfloat16), want, c, kOracle);
  const std::string sm = "softmax " + ia + " --fp32-dest-acc-en --output-dtype float32 --option tt_metal=latest";  // approx: the bare estimate
  EXPECT_EQ(differing(r.run(sm + " --device blackhole"), to_row_major(want)), 0);
  EXPECT_GT(differing(r.run(sm), to_row_major(want)), 0);
}

// One output of a 32x32x32 matmul sums to exactly -1 unit in an FP32 Dst
// (-1 and -2^-23 in the first face's two groups, +1 in the second):
// Blackhole gives -2^-23, Wormhole's leading-sign counter -16.
TEST(BlackholeCli, MatmulMinusOneUlp) {
  BlackholeOpRun r;
  std::vector<float> a(32 * 32, 0.0f), b(32 * 32, 0.0f);
  a[0] = -1.0f, a[8] = -std::ldexp(1.0f, -23), a[16] = 1.0f;
  b[0] = b[8 * 32] = b[16 * 32] = 1.0f;
  const std::string ia = r.in("a.npy", Tensor::from_f32({32, 32}, a)), ib = r.in("b.npy", Tensor::from_f32({32, 32}, b));
  const std::string mm = "matmul " + ia + " " + ib + " --fp32-dest-acc-en --output-dtype float32";
  EXPECT_EQ(r.run(mm + " --device blackhole").to_f32()[0], -std::ldexp(1.0f, -23));
  EXPECT_EQ(r.run(mm).to_f32()[0], -16.0f);
}
