// `mha op`: one TT-NN op end to end through the binary, checked bit for bit
// against the numeric core called directly (lane models, Isa::Scalar), a few
// hand-derived values, torch's bfloat16 conversion, and its exit-2 errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ops/softmax/softmax_kernel.h"
#include "backends/ttsim/ops/matmul/matmul_program.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "io/tensor_file.h"
#include "support/test_support.h"
#include "ttsim/eltwise.h"
#include "ttsim/formats.h"
#include "ttsim/matrix_unit.h"
#include "ttsim/sfpu.h"
#include "ttsim/tile.h"
#include "backends/ttsim/ops/unary/unary_kernel.h"
#include "util/error.h"
#include "ttsim_test_util.h"

using namespace mha;
using namespace mha::test;
using namespace mha::ttsim;
using namespace mha::ttsim_test;

namespace {


// Bit-for-bit equality of two float32 tensors (NaN payloads included).
struct OpRun {
  TempDir dir;
  std::string in(const std::string& name, const Tensor& t) {
    io::write_npy(dir.file(name), t);
    return shell_quote(dir.file(name));
  }
  // Runs `mha op ARGS -o out.npy`; expects exit 0 and returns the output.
  Tensor run(const std::string& args, std::string* stdout_text = nullptr) {
    CommandResult r = run_mha("op " + args + " -o " + shell_quote(dir.file("out.npy")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (stdout_text) *stdout_text = r.out;
    return io::read_tensor(dir.file("out.npy"));
  }
};

// The device values of op(a, ...) as the core computes them, with the K
// blocking of the program TT-NN picks for the call (DRAM, no core_grid,
// wormhole_b0's 8x8 grid: what `mha op` runs by default).
Tensor core_matmul(const Tensor& a, const Tensor& b, DataFormat fa, DataFormat fb, ComputeConfig c) {
  const TileTensor ta = to_tile_layout(a, fa), tb = to_tile_layout(b, fb);
  MatmulCall call = matmul_call(ta, tb, c);
  call.all_dram = true;
  TileTensor out;
  tt_matmul(ta, tb, out, c, kOracle, choose_matmul_program(call).blocking);
  return to_tensor(out);
}

}  // namespace

TEST(OpCli, MatmulBitForBitWithTheCore) {
  OpRun r;
  const Tensor a = randn({2, 40, 64}, 1), b = randn({64, 48}, 2);
  const std::string ia = r.in("a.npy", a), ib = r.in("b.npy", b);
  ComputeConfig c;
  c.math_fidelity = MathFidelity::HiFi4;
  c.fp32_dest_acc_en = true;
  c.output = DataFormat::Bfloat16;
  EXPECT_TRUE(same_bits(r.run("matmul " + ia + " " + ib +
                              " --dtype bfloat8_b --output-dtype bfloat16 --math-fidelity HiFi4 --fp32-dest-acc-en "
                              "--option threads=2"),
                        core_matmul(a, b, DataFormat::Bfp8_b, DataFormat::Bfp8_b, c)));
  // Defaults: bfloat16 in and out, HiFi2, 16-bit Dst.
  ComputeConfig d;
  d.math_fidelity = MathFidelity::HiFi2;
  EXPECT_TRUE(same_bits(r.run("matmul " + ia + " " + ib), core_matmul(a, b, DataFormat::Bfloat16, DataFormat::Bfloat16, d)));
  // Per-operand dtypes: bfloat4_b weights, bfloat8_b output.
  d.output = DataFormat::Bfp8_b;
  EXPECT_TRUE(same_bits(r.run("matmul " + ia + " " + ib + " --in1-dtype bfloat4_b --output-dtype bfloat8_b"),
                        core_matmul(a, b, DataFormat::Bfloat16, DataFormat::Bfp4_b, d)));
  // Batched B with A's leading dims.
  const Tensor bb = randn({2, 64, 32}, 3);
  ComputeConfig e;
  EXPECT_TRUE(same_bits(r.run("matmul " + ia + " " + r.in("bb.npy", bb)),
                        core_matmul(a, bb, DataFormat::Bfloat16, DataFormat::Bfloat16, e)));
}

TEST(OpCli, DefaultsAreTtnnsAndReportedInJson) {
  OpRun r;
  const Tensor a = randn({32, 64}, 4), b = randn({64, 32}, 5);
  const std::string ia = r.in("a.npy", a), ib = r.in("b.npy", b);
  auto json = [&](const std::string& args) {
    std::string out;
    r.run(args + " --json -", &out);
    return nlohmann::json::parse(out);
  };
  nlohmann::json j = json("matmul " + ia + " " + ib + " --dtype bfloat8_b");
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "LoFi");  // both operands block float
  EXPECT_EQ(j["inputs"][0]["dtype"], "bfloat8_b");
  EXPECT_EQ(j["inputs"][0]["file_dtype"], "float32");
  EXPECT_EQ(j["output"]["dtype"], "bfloat8_b");
  EXPECT_EQ(j["program_cache"]["ttnn.matmul"]["misses"], 1);
  EXPECT_EQ(j["memory_config"], "DRAM");
  j = json("matmul " + ia + " " + ib);
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "HiFi2");
  // --option takes one KEY=VALUE each time, so inputs may follow it.
  j = json("matmul --option core_grid=[4,4] " + ia + " " + ib + " --memory-config L1 --option threads=2");
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "LoFi");
  EXPECT_EQ(j["core_grid"], nlohmann::json::array({4, 4}));
  EXPECT_EQ(j["memory_config"], "L1");
  j = json("softmax " + ia);
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "HiFi4");
  EXPECT_EQ(j["compute_kernel_config"]["math_approx_mode"], true);
  j = json("exp " + ia);
  EXPECT_EQ(j["compute_kernel_config"]["math_approx_mode"], false);
  EXPECT_EQ(j["compute_kernel_config"]["fp32_dest_acc_en"], false);
  j = json("exp " + ia + " --dtype float32");
  EXPECT_EQ(j["compute_kernel_config"]["fp32_dest_acc_en"], true);  // preserve_fp32_precision
  j = json("multiply " + ia + " --scalar 0.1");
  EXPECT_EQ(j["compute_kernel_config"]["math_fidelity"], "HiFi4");
  EXPECT_EQ(j["scalar_bf16"].get<double>(), 0.10009765625);
}

TEST(OpCli, LinearWithBiasBitForBit) {
  OpRun r;
  const Tensor a = randn({3, 50, 64}, 6), w = randn({64, 40}, 7), bias = randn({40}, 8);
  ComputeConfig c;
  c.math_fidelity = MathFidelity::HiFi2;
  // TT-NN's program for (50 x 64) @ (64 x 40) in DRAM without a core_grid:
  // 2D, K over the grid's width in blocks of one tile (2 blocks); with the
  // fused bias the packer accumulates both in L1 and the bias add reads that
  // bf16 sum; without it the partials spill through bf16 (exact).
  MatmulBlocking with_bias{1, true, DataFormat::Bfloat16, true}, no_bias{1, false, DataFormat::Bfloat16, false};
  TileTensor mm, want;
  tt_matmul(to_tile_layout(a, DataFormat::Bfloat16), to_tile_layout(w, DataFormat::Bfloat16), mm, c, kOracle,
            with_bias);
  want = make_tile_tensor(mm.shape, DataFormat::Bfloat16);
  tt_add(mm, to_tile_layout(bias.data<float>(), {1, 40}, DataFormat::Bfloat16), want, false, false, kOracle);
  EXPECT_TRUE(same_bits(r.run("linear " + r.in("a.npy", a) + " " + r.in("w.npy", w) + " " + r.in("b.npy", bias)),
                        to_tensor(want)));
  // Without a bias it is the matmul.
  tt_matmul(to_tile_layout(a, DataFormat::Bfloat16), to_tile_layout(w, DataFormat::Bfloat16), mm, c, kOracle, no_bias);
  EXPECT_TRUE(same_bits(r.run("linear " + r.in("a.npy", a) + " " + r.in("w.npy", w)), to_tensor(mm)));
}

TEST(OpCli, AddAndMultiplyBitForBit) {
  OpRun r;
  const Tensor a = randn({2, 40, 70}, 9), b = randn({2, 40, 70}, 10), row = randn({1, 70}, 11);
  const std::string ia = r.in("a.npy", a), ib = r.in("b.npy", b), ir = r.in("row.npy", row);
  const TileTensor ta = to_tile_layout(a, DataFormat::Bfloat16), tb = to_tile_layout(b, DataFormat::Bfp8_b),
                   tr = to_tile_layout(row, DataFormat::Bfloat16);
  TileTensor want = make_tile_tensor(a.shape(), DataFormat::Bfloat16);
  tt_add(ta, tr, want, false, false, kOracle);
  EXPECT_TRUE(same_bits(r.run("add " + ia + " " + ir), to_tensor(want)));
  tt_mul_scalar(ta, 0.3f, want, MathFidelity::HiFi4, false, false, kOracle);
  EXPECT_TRUE(same_bits(r.run("multiply " + ia + " --scalar 0.3"), to_tensor(want)));
  // Tensor x tensor: each element one ELWMUL lane (fpu_mul), a in SrcA.
  std::vector<float> m(static_cast<size_t>(a.numel()));
  const std::vector<float> va = to_row_major(ta), vb = to_row_major(tb);
  for (size_t i = 0; i < m.size(); ++i) {
    const float p = fpu_mul(va[i], vb[i], MathFidelity::HiFi4, false);
    pack_from_dst(&p, &m[i], 1, DataFormat::Bfloat16, false, false);
  }
  EXPECT_TRUE(same_bits(r.run("multiply " + ia + " " + ib + " --in1-dtype bfloat8_b"), Tensor::from_f32(a.shape(), m)));
  // LoFi: fewer phases, a different (less precise) result, still the lane model's.
  for (size_t i = 0; i < m.size(); ++i) {
    const float p = fpu_mul(va[i], vb[i], MathFidelity::LoFi, false);
    pack_from_dst(&p, &m[i], 1, DataFormat::Bfloat16, false, false);
  }
  EXPECT_TRUE(same_bits(r.run("multiply " + ia + " " + ib + " --in1-dtype bfloat8_b --math-fidelity LoFi"),
                        Tensor::from_f32(a.shape(), m)));
}

TEST(OpCli, SoftmaxExpReciprocalBitForBit) {
  OpRun r;
  const Tensor a = randn({3, 20, 50}, 12, 2.0f), p = randn({3, 20, 50}, 13, 1.0f, 3.0f);
  const std::string ia = r.in("a.npy", a), ip = r.in("p.npy", p);
  TileTensor want;
  ComputeConfig c = softmax_default_config();
  tt_softmax(to_tile_layout(a, DataFormat::Bfloat16), want, c, kOracle);
  EXPECT_TRUE(same_bits(r.run("softmax " + ia), to_tensor(want)));
  c.fp32_dest_acc_en = true;
  c.output = DataFormat::Float32;
  tt_softmax(to_tile_layout(a, DataFormat::Bfloat16), want, c, kOracle);
  EXPECT_TRUE(same_bits(r.run("softmax " + ia + " --fp32-dest-acc-en --output-dtype float32"), to_tensor(want)));

  // exp_tile / recip_tile per Dst value, then the packer: lane functions
  // called directly, for each (approx, fp32 Dst) setting.
  for (bool approx : {false, true})
    for (bool fp32 : {false, true}) {
      const std::string flags = std::string(" --math-approx-mode=") + (approx ? "true" : "false") +
                                " --fp32-dest-acc-en=" + (fp32 ? "true" : "false");
      for (UnaryOp u : {UnaryOp::Exp, UnaryOp::Reciprocal}) {
        const Tensor& x = u == UnaryOp::Exp ? a : p;
        const std::vector<float> in = to_row_major(to_tile_layout(x, DataFormat::Bfloat16));
        std::vector<float> m(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          const float d = u == UnaryOp::Exp ? sfpu_exp(in[i], approx, fp32) : sfpu_reciprocal(in[i], approx, fp32);
          pack_from_dst(&d, &m[i], 1, DataFormat::Bfloat16, fp32, false);
        }
        EXPECT_TRUE(same_bits(r.run(std::string(unary_op_name(u)) + " " + (u == UnaryOp::Exp ? ia : ip) + flags),
                              Tensor::from_f32(x.shape(), m)))
            << unary_op_name(u) << flags;
      }
    }
  // A float32 input goes to an FP32 Dst whole (no bf16 / tf32 truncation).
  std::vector<float> in = to_row_major(to_tile_layout(a, DataFormat::Float32)), m(in.size());
  for (size_t i = 0; i < in.size(); ++i) m[i] = sfpu_exp(in[i], false, true);
  EXPECT_TRUE(same_bits(r.run("exp " + ia + " --dtype float32"), Tensor::from_f32(a.shape(), m)));
}

// Values worked out by hand from the format and FPU rules (docs/TTSIM.md).
TEST(OpCli, HandDerivedValues) {
  OpRun r;
  // bfloat8_b: one face row shares 1.0's exponent; 7 magnitude bits are
  // steps of 1/64: 0.01 -> 0.64 steps -> 1/64; 0.75 and -0.5 exact; 0.3 ->
  // 19.2 steps -> 19/64.
  std::vector<float> v(16, 0.0f);
  v[0] = 1.0f, v[1] = 0.01f, v[2] = 0.75f, v[3] = -0.5f, v[4] = 0.3f;
  Tensor got = r.run("to-device " + r.in("v.npy", Tensor::from_f32({1, 16}, v)) + " --dtype bfloat8_b");
  EXPECT_EQ(got.data<float>()[0], 1.0f);
  EXPECT_EQ(got.data<float>()[1], 1.0f / 64);
  EXPECT_EQ(got.data<float>()[2], 0.75f);
  EXPECT_EQ(got.data<float>()[3], -0.5f);
  EXPECT_EQ(got.data<float>()[4], 19.0f / 64);
  // 3 * 0.1: the scalar becomes bf16 0.10009765625; the product
  // 0.30029296875 = 153.75/128 * 2^-2 is rounded in a 16-bit Dst to
  // 154/128 * 2^-2 = 0.30078125.
  got = r.run("multiply " + r.in("t.npy", Tensor::from_f32({1, 1}, {3.0f})) + " --scalar 0.1");
  EXPECT_EQ(got.data<float>()[0], 0.30078125f);
  // [1 2] @ [3 4]^T = 11, exact at any fidelity.
  got = r.run("matmul " + r.in("x.npy", Tensor::from_f32({1, 2}, {1, 2})) + " " +
              r.in("y.npy", Tensor::from_f32({2, 1}, {3, 4})) + " --math-fidelity LoFi");
  EXPECT_EQ(got.data<float>()[0], 11.0f);
  EXPECT_EQ(got.shape(), (Shape{1, 1}));
}

// to-device round trip against the host conversion functions.
TEST(OpCli, ToDeviceMatchesHostConversions) {
  OpRun r;
  const Tensor x = randn({3, 20, 50}, 14, 4.0f);
  const std::string ix = r.in("x.npy", x);
  const float* xv = x.data<float>();
  std::vector<float> want(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < want.size(); ++i) want[i] = host_round_bf16(xv[i]);
  EXPECT_TRUE(same_bits(r.run("to-device " + ix), Tensor::from_f32(x.shape(), want)));
  EXPECT_TRUE(same_bits(r.run("to-device " + ix + " --dtype float32"), x));
  for (DataFormat f : {DataFormat::Bfp8_b, DataFormat::Bfp4_b}) {
    // Each row padded with zeros to 64 columns, quantised 16 at a time.
    for (int64_t row = 0; row < 60; ++row) {
      float pad[64] = {}, q[64];
      std::memcpy(pad, xv + row * 50, 50 * sizeof(float));
      for (int k = 0; k < 4; ++k) host_quantize_bfp_row(pad + 16 * k, q + 16 * k, bfp_magnitude_bits(f));
      std::memcpy(&want[static_cast<size_t>(row * 50)], q, 50 * sizeof(float));
    }
    EXPECT_TRUE(same_bits(r.run("to-device " + ix + " --dtype " + format_name(f)), Tensor::from_f32(x.shape(), want)))
        << format_name(f);
  }
}

// mha op to-device --dtype bfloat16 is torch's .to(torch.bfloat16),
// including ties, and values around the bf16 range's ends.
TEST(OpCli, ToDeviceBfloat16EqualsTorch) {
  OpRun r;
  const std::string dir = r.dir.path();
  CommandResult py = run_python(
      "import torch, numpy as np\n"
      "torch.manual_seed(0)\n"
      "x = torch.randn(4, 33, 70) * 10\n"
      "x.view(-1)[:6] = torch.tensor([1.00390625, 1.01171875, -2.0078125, 3.4e38, 1e-39, 0.0])\n"
      "np.save('" + dir + "/x.npy', x.numpy())\n"
      "np.save('" + dir + "/want.npy', x.to(torch.bfloat16).float().numpy())\n");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_TRUE(same_bits(r.run("to-device " + shell_quote(dir + "/x.npy") + " --dtype bfloat16"),
                        io::read_tensor(dir + "/want.npy")));
}

// Named tensors from .npz and .safetensors, as other commands take them.
TEST(OpCli, NamedInputsFromNpzAndSafetensors) {
  OpRun r;
  const Tensor a = randn({32, 64}, 15), b = randn({64, 32}, 16);
  io::write_npz(r.dir.file("t.npz"), {{"a", a}, {"b", b}});
  io::write_safetensors(r.dir.file("t.safetensors"), {{"a", a}, {"b", b}});
  const Tensor want = r.run("matmul " + r.in("a.npy", a) + " " + r.in("b.npy", b));
  EXPECT_TRUE(same_bits(r.run("matmul " + shell_quote(r.dir.file("t.npz") + ":a") + " " +
                              shell_quote(r.dir.file("t.safetensors") + ":b")),
                        want));
}

// The library entry point, as tests outside the CLI call it.
TEST(OpCli, LibraryRejectsWhatTheOpCannotTake) {
  OpRequest q;
  q.op = "matmul";
  q.inputs = {{"a", randn({4, 8}, 1), std::nullopt}, {"b", randn({9, 4}, 2), std::nullopt}};
  EXPECT_THROW(run_tt_op(q), InputError);
  q.inputs[1].tensor = randn({8, 4}, 2);
  EXPECT_EQ(run_tt_op(q).output.shape(), (Shape{4, 4}));
  EXPECT_EQ(std::string(tt_op("to-device").name), "to-device");
  EXPECT_THROW(tt_op("matmult"), InputError);
}

TEST(OpCli, BadInputsExitTwoWithOneLine) {
  TempDir dir;
  io::write_npy(dir.file("a.npy"), randn({2, 40, 64}, 1));
  io::write_npy(dir.file("b.npy"), randn({64, 48}, 2));
  io::write_npy(dir.file("r.npy"), randn({1, 64}, 3));
  io::write_npy(dir.file("i.npy"), Tensor(DType::I32, {4, 4}));
  const std::string a = shell_quote(dir.file("a.npy")), b = shell_quote(dir.file("b.npy")),
                    row = shell_quote(dir.file("r.npy")), out = " -o " + shell_quote(dir.file("o.npy"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"matmult " + a + " " + b + out, "unknown op 'matmult': expected one of matmul, linear"},
      {"matmul " + a + out, "matmul: expected inputs A B, found 1 input"},
      {"softmax " + a + " " + b + out, "softmax: expected inputs A, found 2 inputs"},
      // Counted before any file is read: a second KEY=VALUE after one --option is an input.
      {"matmul --option threads=2 kernels=scalar " + a + " " + b + out, "matmul: expected inputs A B, found 3 inputs"},
      {"matmul " + a + " " + a + out, "matmul: inner dims differ: A (2, 40, 64) has K = 64, B (2, 40, 64) has K = 40"},
      {"add " + a + " " + b + out, "add: cannot broadcast B (64, 48) onto A (2, 40, 64)"},
      {"multiply " + a + " " + b + out, "multiply: cannot broadcast B (64, 48)"},
      {"linear " + a + " " + b + " " + row + out, "linear: expected BIAS of shape (48) or (1, 48) (B's N), found (1, 64)"},
      {"exp " + a + out + " --dtype bfloat9", "--dtype: expected bfloat16, bfloat8_b, bfloat4_b or float32, found 'bfloat9'"},
      {"exp " + a + out + " --output-dtype int8", "--output-dtype: expected bfloat16"},
      {"exp " + a + out + " --in1-dtype bfloat16", "--in1-dtype: exp was given 1 input(s) (A), so there is no input 1"},
      {"exp " + a + out + " --math-fidelity HiFi5", "math_fidelity: expected \"LoFi\", \"HiFi2\", \"HiFi3\" or \"HiFi4\", found \"HiFi5\""},
      {"exp " + a + out + " --memory-config SRAM", "memory_config: expected \"L1\" or \"DRAM\", found \"SRAM\""},
      {"exp " + a + out + " --device wormhole", "device: expected \"wormhole_b0\", \"grayskull\" or \"blackhole\""},
      {"exp " + a + out + " --option threads=0", "threads: expected an integer from 1 to 1024, found 0"},
      {"exp " + a + out + " --option colour=1", "colour: unknown tt-sim option"},
      {"exp " + a + out + " --option threads", "--option: expected KEY=VALUE"},
      {"matmul " + a + " " + b + out + " --option core_grid=[9,9]", "core_grid: expected [y, x] with 1 <= y <= 8"},
      {"exp " + shell_quote(dir.file("missing.npy")) + out, "missing.npy"},
      {"exp " + shell_quote(dir.file("i.npy")) + out, "expected a floating-point tensor, found int32"},
      {"exp " + a + " -o " + a, "is the same file as the input"},
      {"to-device " + a + out + " --output-dtype bfloat16", "to-device: the output dtype is the input's --dtype"},
      {"to-device " + a + out + " --math-fidelity HiFi4", "to-device: a host conversion has no compute config"},
      {"multiply " + a + out, "multiply: expected two inputs A B, or one with --scalar S, found 1"},
      {"multiply " + a + " " + a + out + " --scalar 2", "multiply: expected one input with --scalar"},
      {"exp " + a + out + " --scalar 2", "exp: --scalar applies to multiply only"},
      {"exp " + a + out + " --fp32-dest-acc-en=maybe", "fp32-dest-acc-en"},
  };
  for (const auto& [args, needle] : cases) {
    CommandResult r = run_mha("op " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::ifstream(dir.file("o.npy")).good()) << args;
  }
}

// `mha op --help` is generated from the op table: every op with its
// operands and defaults, and each op's own --option keys.
TEST(OpCli, HelpListsEveryOpOfTheTable) {
  CommandResult r = run_mha("op --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const TtOpDesc* d : tt_ops()) {
    EXPECT_NE(r.out.find(std::string("  ") + d->name + " " + d->operands + "\n"), std::string::npos) << d->name;
    EXPECT_NE(r.out.find(std::string("defaults: ") + d->defaults), std::string::npos) << d->name;
    for (const OpParam& p : d->params)
      EXPECT_NE(r.out.find(std::string("--option ") + p.key + "="), std::string::npos) << d->name << " " << p.key;
  }
}

// An input on the device (mha.ttnn's tensors: an earlier op's output kept as
// tiles) gives the op what converting its values gives: taken as is when
// that conversion is the identity, else converted from its values.
TEST(OpCli, DeviceInputEqualsItsValues) {
  auto run = [](const std::string& op, std::vector<OpInput> in, bool keep = false) {
    OpRequest req;
    req.op = op;
    req.inputs = std::move(in);
    req.keep_output = keep;
    return run_tt_op(req);
  };
  const Tensor a = randn({2, 40, 70}, 21), row = randn({1, 70}, 22);
  TileTensor x = to_tile_layout(a, DataFormat::Bfloat16);
  x.at(1, 45, 3) = 5.0f;  // padding an op left non-zero (exp of a zero pad is 1)
  x.at(0, 3, 80) = -7.0f;
  const auto kept = keep_on_device(x);
  EXPECT_TRUE(kept->as_host());
  EXPECT_EQ(kept->tiles.at(1, 45, 3), 0.0f);
  EXPECT_EQ(kept->tiles.at(0, 3, 80), 0.0f);
  const Tensor values = to_tensor(x);
  const auto bf16 = DataFormat::Bfloat16;
  const OpResult want = run("softmax", {{"x", values, bf16, nullptr}});
  const OpResult got = run("softmax", {{"x", Tensor(), bf16, kept}});
  EXPECT_TRUE(same_bits(got.output, want.output));
  EXPECT_EQ(got.info["inputs"], want.info["inputs"]);
  // A NaN the host rounding changes (to 0xffff0000): converted from its values.
  const uint32_t nan = 0x7fc00000u;
  std::memcpy(&x.at(0, 0, 0), &nan, sizeof nan);
  const auto with_nan = keep_on_device(x);
  EXPECT_FALSE(with_nan->as_host());
  const auto r = keep_on_device(to_tile_layout(row, bf16));
  EXPECT_TRUE(same_bits(run("add", {{"x", Tensor(), bf16, with_nan}, {"r", Tensor(), bf16, r}}).output,
                        run("add", {{"x", to_tensor(x), bf16, nullptr}, {"r", row, bf16, nullptr}}).output));
  // Block floats the host encoding gives are taken as is; a value it would
  // not give is converted from its values.
  TileTensor q = to_tile_layout(a, DataFormat::Bfp8_b);
  EXPECT_TRUE(keep_on_device(q)->as_host());
  const uint32_t odd = 0x3f400001u;  // 0.75 and a low bit no bfp8 value has
  std::memcpy(&q.at(0, 0, 3), &odd, sizeof odd);
  const auto off = keep_on_device(q);
  EXPECT_FALSE(off->as_host());
  EXPECT_TRUE(same_bits(run("softmax", {{"x", Tensor(), DataFormat::Bfp8_b, off}}).output,
                        run("softmax", {{"x", to_tensor(q), DataFormat::Bfp8_b, nullptr}}).output));
  EXPECT_TRUE(keep_on_device(to_tile_layout(a, DataFormat::Float32))->as_host());
  // keep_output: the output as tiles, the same values.
  const OpResult tiles = run("softmax", {{"x", values, bf16, nullptr}}, true);
  ASSERT_TRUE(tiles.tiles);
  EXPECT_TRUE(same_bits(to_tensor(tiles.tiles->tiles), want.output));
  EXPECT_EQ(tiles.output.numel(), 0);
}
