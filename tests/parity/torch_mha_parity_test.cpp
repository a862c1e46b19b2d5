// torch_mha against torch.nn.MultiheadAttention itself (torch 1.13). Every
// scenario pins the feature it is about and draws everything else (shapes,
// seeds, the other options) afresh each run.
#include <functional>
#include <string>
#include <vector>

#include "parity/parity.h"

namespace mha::test {
namespace {

enum class Mask { None, Bool2d, Float2d, Bool3d, Float3d };
enum class Kpm { None, Bool, Float };

struct Features {
  int64_t n, l, s, heads, e, kdim, vdim;
  bool batch_first, unbatched, bias, add_bias_kv, add_zero_attn;
  bool need_weights, average, is_causal, fully_masked;
  Mask mask;
  Kpm kpm;
};

Features draw(Rng& r) {
  Features f;
  f.n = r.uniform(1, 3);
  f.l = r.coin(0.15) ? r.uniform(40, 100) : r.uniform(1, 10);
  f.s = r.coin() ? f.l : r.uniform(1, 10);
  f.heads = r.uniform(1, 4);
  f.e = f.heads * (r.coin(0.2) ? r.uniform(9, 40) : r.uniform(1, 8));  // now and then past SIMD widths
  f.kdim = r.coin(0.25) ? r.uniform(1, 16) : f.e;
  f.vdim = r.coin(0.25) ? r.uniform(1, 16) : f.e;
  f.batch_first = r.coin();
  f.unbatched = r.coin(0.1);
  f.bias = r.coin(0.8);
  f.add_bias_kv = r.coin(0.2);
  f.add_zero_attn = r.coin(0.2);
  f.need_weights = r.coin(0.7);
  f.average = r.coin();
  f.is_causal = r.coin(0.15);
  f.fully_masked = false;
  f.mask = f.is_causal ? Mask::None : Mask(r.uniform(0, 4));
  f.kpm = r.coin(0.3) ? Kpm::Bool : r.coin(0.1) ? Kpm::Float : Kpm::None;
  return f;
}

// torch 1.13 rejects a float key_padding_mask with a float attn_mask, and mha
// rejects is_causal with an attn_mask; both are tested elsewhere as errors.
void make_legal(Features& f) {
  if (f.is_causal) f.mask = Mask::None;
  if (f.kpm == Kpm::Float && (f.mask == Mask::Float2d || f.mask == Mask::Float3d)) f.kpm = Kpm::Bool;
  if (f.fully_masked) f.add_bias_kv = f.add_zero_attn = false;  // their columns are never masked
  if (f.unbatched) f.n = 1;
}

// Python lines for the masks. Key 0 stays unmasked, so only the fully_masked
// scenario has rows of -inf (NaN in torch and mha alike).
std::string mask_setup(Rng& r, const Features& f) {
  std::string py;
  std::vector<int64_t> shape = {f.l, f.s};
  if (f.mask == Mask::Bool3d || f.mask == Mask::Float3d) shape.insert(shape.begin(), f.n * f.heads);
  const std::string sh = py_shape(shape);
  if (f.mask == Mask::Bool2d || f.mask == Mask::Bool3d) {
    py += "am = rng.random(" + sh + ") < 0.3\nam[..., 0] = False\n";
    if (f.fully_masked) py += "am[..., " + std::to_string(r.uniform(0, f.l - 1)) + ", :] = True\n";
  } else if (f.mask != Mask::None) {
    py += "am = np.where(rng.random(" + sh + ") < 0.2, np.float32(-np.inf), f32(" + sh + "))\n";
    py += "am[..., 0] = f32(am[..., 0].shape)\n";
    if (f.fully_masked) py += "am[..., " + std::to_string(r.uniform(0, f.l - 1)) + ", :] = -np.inf\n";
  }
  if (f.mask != Mask::None) py += "np.save('attn_mask.npy', am)\n";
  const std::string ksh = f.unbatched ? py_shape({f.s}) : py_shape({f.n, f.s});
  if (f.kpm == Kpm::Bool) {
    py += "kpm = rng.random(" + ksh + ") < 0.3\nkpm[..., 0] = False\n";
    if (f.fully_masked && f.mask == Mask::None)
      py += f.unbatched ? "kpm[:] = True\n" : "kpm[" + std::to_string(r.uniform(0, f.n - 1)) + ", :] = True\n";
  } else if (f.kpm == Kpm::Float) {
    py += "kpm = np.where(rng.random(" + ksh + ") < 0.2, np.float32(-np.inf), f32(" + ksh + "))\nkpm[..., 0] = 0\n";
  }
  if (f.kpm != Kpm::None) py += "np.save('key_padding_mask.npy', kpm)\n";
  return py;
}

json qkv_input(Rng& r, Case& c, const char* name, std::vector<int64_t> shape) {
  if (r.coin(0.3)) {
    c.setup += "np.save('" + std::string(name) + ".npy', f32(" + py_shape(shape) + "))\n";
    return std::string(name) + ".npy";
  }
  return {{r.coin() ? "rand" : "randn", shape}};
}

Case make_case(Rng& r, const std::string& name, Features f) {
  make_legal(f);
  Case c;
  c.name = name;
  json p = {{"embed_dim", f.e}, {"num_heads", f.heads}, {"batch_first", f.batch_first}};
  if (!f.bias || r.coin()) p["bias"] = f.bias;
  if (f.add_bias_kv) p["add_bias_kv"] = true;
  if (f.add_zero_attn) p["add_zero_attn"] = true;
  if (f.kdim != f.e || r.coin(0.2)) p["kdim"] = f.kdim;
  if (f.vdim != f.e || r.coin(0.2)) p["vdim"] = f.vdim;
  if (r.coin(0.3)) p["dropout"] = 0.25;  // inference never drops
  c.config = {{"variant", "torch_mha"}, {"params", p}, {"weights", {{"init", "torch"}, {"seed", r.draw_seed()}}}};

  auto seq_shape = [&](int64_t len, int64_t dim) -> std::vector<int64_t> {
    if (f.unbatched) return {len, dim};
    return f.batch_first ? std::vector<int64_t>{f.n, len, dim} : std::vector<int64_t>{len, f.n, dim};
  };
  json in = {{"seed", r.draw_seed()}};
  in["query"] = qkv_input(r, c, "query", seq_shape(f.l, f.e));
  in["key"] = qkv_input(r, c, "key", seq_shape(f.s, f.kdim));
  in["value"] = qkv_input(r, c, "value", seq_shape(f.s, f.vdim));
  c.setup += mask_setup(r, f);
  if (f.mask != Mask::None) in["attn_mask"] = "attn_mask.npy";
  if (f.kpm != Kpm::None) in["key_padding_mask"] = "key_padding_mask.npy";
  c.config["inputs"] = in;

  json opt = json::object();
  if (!f.need_weights || r.coin()) opt["need_weights"] = f.need_weights;
  if (!f.average || r.coin(0.3)) opt["average_attn_weights"] = f.average;
  if (f.is_causal || r.coin(0.1)) opt["is_causal"] = f.is_causal;
  c.config["options"] = opt;
  return c;
}

using Pin = std::function<void(Rng&, Features&)>;

void run_scenarios(const std::vector<std::pair<std::string, Pin>>& scenarios) {
  Rng r;
  SCOPED_TRACE(r.trace());
  std::vector<Case> cases;
  for (const auto& [name, pin] : scenarios) {
    Features f = draw(r);
    pin(r, f);
    cases.push_back(make_case(r, name, f));
  }
  run_cases(cases, r.seed());
}

TEST(ParityTorchMha, Projections) {
  run_scenarios({
      {"cross_attention", [](Rng& r, Features& f) { f.s = f.l + r.uniform(1, 5); f.unbatched = false; }},
      {"cross_attention_short_keys", [](Rng& r, Features& f) { f.l = r.uniform(3, 12); f.s = r.uniform(1, f.l - 1); }},
      {"kdim_vdim", [](Rng& r, Features& f) { f.kdim = f.e + r.uniform(1, 5); f.vdim = r.uniform(1, 16); }},
      {"add_bias_kv", [](Rng&, Features& f) { f.add_bias_kv = true; }},
      {"add_zero_attn", [](Rng&, Features& f) { f.add_zero_attn = true; f.kpm = Kpm::Bool; }},
      {"bias_kv_zero_attn_wide", [](Rng& r, Features& f) {
         f.add_bias_kv = f.add_zero_attn = true;
         f.heads = 4;
         f.e = 4 * r.uniform(4, 8);  // 16+ elements: torch's vectorised normal_
       }},
      {"no_bias", [](Rng&, Features& f) { f.bias = false; }},
      {"unbatched", [](Rng&, Features& f) { f.unbatched = true; }},
  });
}

TEST(ParityTorchMha, Masks) {
  run_scenarios({
      {"bool_mask_2d", [](Rng&, Features& f) { f.mask = Mask::Bool2d; f.is_causal = false; }},
      {"float_mask_2d", [](Rng&, Features& f) { f.mask = Mask::Float2d; f.is_causal = false; }},
      {"bool_mask_3d", [](Rng&, Features& f) { f.mask = Mask::Bool3d; f.is_causal = false; }},
      {"float_mask_3d", [](Rng&, Features& f) { f.mask = Mask::Float3d; f.is_causal = false; }},
      {"key_padding_mask", [](Rng&, Features& f) { f.kpm = Kpm::Bool; }},
      {"key_padding_mask_float", [](Rng&, Features& f) { f.kpm = Kpm::Float; }},
      {"is_causal", [](Rng&, Features& f) { f.is_causal = true; f.add_bias_kv = f.add_zero_attn = false; }},
      {"is_causal_extra_keys", [](Rng&, Features& f) { f.is_causal = true; f.add_bias_kv = f.add_zero_attn = true; }},
      {"fully_masked_rows", [](Rng& r, Features& f) {
         f.fully_masked = true;
         f.is_causal = false;
         f.mask = r.pick(std::vector<Mask>{Mask::None, Mask::Bool2d, Mask::Float2d, Mask::Bool3d, Mask::Float3d});
         if (f.mask == Mask::None) f.kpm = Kpm::Bool;
       }},
  });
}

TEST(ParityTorchMha, WeightsAndLayouts) {
  run_scenarios({
      {"need_weights_averaged", [](Rng&, Features& f) { f.need_weights = true; f.average = true; }},
      {"need_weights_per_head", [](Rng&, Features& f) { f.need_weights = true; f.average = false; }},
      {"no_weights", [](Rng&, Features& f) { f.need_weights = false; }},
      {"batch_first", [](Rng&, Features& f) { f.batch_first = true; f.unbatched = false; }},
      {"sequence_first", [](Rng&, Features& f) { f.batch_first = false; f.unbatched = false; }},
      {"anything_1", [](Rng&, Features&) {}},
      {"anything_2", [](Rng&, Features&) {}},
  });
}

}  // namespace
}  // namespace mha::test
