// The seven seed-notebook variants other than torch_mha against PyTorch, on
// fresh random shapes, seeds and parameter spellings every run.
#include <string>
#include <vector>

#include "parity/parity.h"

namespace mha::test {
namespace {

constexpr int kCasesPerVariant = 4;

// Mostly small shapes; now and then one long enough to cross the cpu
// backend's attention blocks.
int64_t seq_len(Rng& r) { return r.coin(0.2) ? r.uniform(40, 140) : r.uniform(1, 12); }
// Likewise head widths, now and then past the cpu backend's SIMD widths.
int64_t head_dim(Rng& r) { return r.coin(0.2) ? r.uniform(9, 40) : r.uniform(1, 8); }

json x_input(Rng& r, Case& c, const std::vector<int64_t>& shape, double npy_scale = 1.0) {
  switch (r.uniform(0, 2)) {
    case 0: return {{"rand", shape}};
    case 1: return {{"randn", shape}};
    default:
      c.setup += "np.save('x.npy', f32(" + py_shape(shape) + ", " + std::to_string(npy_scale) + "))\n";
      return "x.npy";
  }
}

json torch_init(Rng& r) { return {{"init", "torch"}, {"seed", r.draw_seed()}}; }

// Seeds 000 and 003 spell the arguments three ways; mha and the oracle take all.
Case book_case(Rng& r, const std::string& variant, int i) {
  Case c;
  c.name = variant + "_" + std::to_string(i);
  const int64_t b = r.uniform(1, 3), l = seq_len(r);
  const int64_t heads = variant == "causal_attention" ? 1 : r.uniform(1, 4);
  const int64_t d_out = variant == "mha_causal" ? heads * head_dim(r) : head_dim(r);
  const int64_t d_in = r.uniform(1, 16);
  const std::vector<std::pair<const char*, const char*>> spellings = {
      {"d_in", "d_out"}, {"dimension_inputs", "dimension_outputs"}, {"dimensions_in", "dimensions_out"}};
  const auto& [in_name, out_name] = r.pick(spellings);
  json p = {{in_name, d_in}, {out_name, d_out}, {"context_length", l + r.uniform(0, 4)}};
  // Dropout is configured but never applied: inference.
  p["dropout"] = r.pick(std::vector<double>{0.0, 0.1, 0.5});
  if (variant != "causal_attention") p["num_heads"] = heads;
  if (r.coin()) p["qkv_bias"] = r.coin();
  c.config = {{"variant", variant}, {"params", p}, {"weights", torch_init(r)}};
  c.config["inputs"] = {{"seed", r.draw_seed()}, {"x", x_input(r, c, {b, l, d_in})}};
  return c;
}

Case aiedge_case(Rng& r, const std::string& variant, int i) {
  Case c;
  c.name = variant + "_" + std::to_string(i);
  const int64_t heads = r.uniform(1, 4), d_model = heads * head_dim(r), b = r.uniform(1, 3), l = seq_len(r);
  c.config = {{"variant", variant}, {"params", {{"d_model", d_model}, {"n_head", heads}}}, {"weights", torch_init(r)}};
  c.config["inputs"] = {{"seed", r.draw_seed()}, {"x", x_input(r, c, {b, l, d_model})}};
  return c;
}

// Seed 002's additive mask (b or 1, 1, 1, s): random as the tutorial draws
// it, or BERT-style padding (0 / -10000 / -inf) that always keeps key 0.
std::string ttnn_mask_setup(Rng& r, int64_t mb, int64_t s) {
  std::string shape = py_shape({mb, 1, 1, s});
  switch (r.uniform(0, 2)) {
    case 0: return "m = rng.random(" + shape + ").astype(np.float32)\n";
    default: {
      std::string fill = r.coin() ? "-10000.0" : "-np.inf";
      return "m = np.where(rng.random(" + shape + ") < 0.4, np.float32(" + fill +
             "), np.float32(0)).astype(np.float32)\nm[..., 0] = 0\n";
    }
  }
}

Case ttnn_case(Rng& r, const std::string& variant, int i) {
  Case c;
  c.name = variant + "_" + std::to_string(i);
  // Cases 0-3 cover init torch / rand with and without a mask every run.
  const bool rand_init = i % 2 == 1;
  // torch.rand weights are all positive, so scores grow like hidden^2: keep
  // them narrow and x small there to keep the float32 problem well-conditioned.
  const int64_t heads = r.uniform(1, 4), hidden = heads * (rand_init ? r.uniform(1, 8) : head_dim(r));
  const int64_t b = r.uniform(1, 3), s = seq_len(r);
  c.config = {{"variant", variant}, {"params", {{"hidden_size", hidden}, {"num_heads", heads}}}};
  c.config["weights"] = {{"init", rand_init ? "rand" : "torch"}, {"seed", r.draw_seed()}};
  c.config["inputs"] = {{"seed", r.draw_seed()},
                        {"x", rand_init ? json("x.npy") : x_input(r, c, {b, s, hidden})}};
  if (rand_init) c.setup += "np.save('x.npy', f32(" + py_shape({b, s, hidden}) + ", 0.05))\n";
  if (i % 4 < 2) {
    c.setup += ttnn_mask_setup(r, r.coin() ? b : 1, s) + "np.save('mask.npy', m)\n";
    c.config["inputs"]["attention_mask"] = "mask.npy";
  }
  return c;
}

template <class Make>
void run_variant(const std::string& variant, Make make) {
  Rng r;
  SCOPED_TRACE(r.trace());
  std::vector<Case> cases;
  for (int i = 0; i < kCasesPerVariant; ++i) cases.push_back(make(r, variant, i));
  run_cases(cases, r.seed());
}

TEST(Parity, CausalAttention) { run_variant("causal_attention", book_case); }
TEST(Parity, MhaWrapper) { run_variant("mha_wrapper", book_case); }
TEST(Parity, MhaCausal) { run_variant("mha_causal", book_case); }
TEST(Parity, AiEdgeMha) { run_variant("mha", aiedge_case); }
TEST(Parity, AiEdgeMhaFusedQkv) { run_variant("mha_fused_qkv", aiedge_case); }
TEST(Parity, TtnnMha) { run_variant("ttnn_mha", ttnn_case); }
TEST(Parity, TtnnMhaFused) { run_variant("ttnn_mha_fused", ttnn_case); }

}  // namespace
}  // namespace mha::test
