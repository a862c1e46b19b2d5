// llama_attention against scripts/torch_oracle.py's restatement of Hugging
// Face's LlamaAttention / MistralAttention, on fresh shapes and seeds every
// run. Every run covers GQA ratios 1, 4, 8 and MQA, head_dim 64 and 128,
// no window / a window shorter than the sequence / one longer, with and
// without biases, given and default position_ids, and a padding mask, on
// the reference (float64, against the float64 module with mha's correctly
// rounded rotary table: model/rope.h) and cpu (float32, against the module
// as written) backends, with run_cases' tolerances (parity.h).
#include <string>
#include <vector>

#include "parity/parity.h"

namespace mha::test {
namespace {

enum class Window { None, Shorter, Longer };

Case llama_case(Rng& r, int i, int64_t ratio, bool mqa, int64_t head_dim, Window window, bool bias, bool positions) {
  Case c;
  c.name = "llama_" + std::to_string(i);
  const int64_t kv = mqa ? 1 : r.uniform(1, 2), heads = mqa ? r.uniform(2, 8) : kv * ratio;
  // Mostly short; now and then past the cpu backend's 96-query blocks.
  const int64_t b = r.uniform(1, 2), l = r.coin(0.25) ? r.uniform(97, 140) : r.uniform(1, 40);
  const int64_t hidden = r.uniform(8, 96);
  json p = {{"hidden_size", hidden}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
            {"head_dim", head_dim}, {"rope_theta", r.pick(std::vector<double>{10000.0, 500000.0, 1000000.0})},
            {"attention_bias", bias}, {"max_position_embeddings", 4096}};
  if (window == Window::Shorter && l > 1) p["sliding_window"] = r.uniform(1, l - 1);
  if (window == Window::Longer) p["sliding_window"] = l + r.uniform(0, 8);
  if (window == Window::None && r.coin()) p["sliding_window"] = nullptr;
  c.config = {{"variant", "llama_attention"}, {"params", p}, {"weights", {{"init", "torch"}, {"seed", r.draw_seed()}}}};
  json inputs = {{"seed", r.draw_seed()}};
  if (r.coin()) {
    inputs["x"] = {{"randn", {b, l, hidden}}};
  } else {
    c.setup += "np.save('x.npy', f32(" + py_shape({b, l, hidden}) + "))\n";
    inputs["x"] = "x.npy";
  }
  if (positions) {
    // Positions past 2^12 exercise the float32 angle's rounding.
    const int64_t pb = r.coin() ? b : 1;
    c.setup += "np.save('pos.npy', np.sort(rng.integers(0, 20000, " + py_shape({pb, l}) + ")).astype(np.int64))\n";
    inputs["position_ids"] = "pos.npy";
  }
  // Right padding keeps key 0 for every query: without a window shorter
  // than the sequence no row is fully masked (where mha gives NaN and the
  // models an average: docs/CONFIG.md).
  if (window != Window::Shorter && r.coin()) {
    c.setup += "m = np.ones(" + py_shape({b, l}) + ", dtype=np.int64)\nfor k in range(" + std::to_string(b) +
               "):\n    m[k, rng.integers(1, " + std::to_string(l + 1) + "):] = 0\nnp.save('mask.npy', m)\n";
    inputs["attention_mask"] = "mask.npy";
  }
  c.config["inputs"] = inputs;
  if (r.coin(0.3)) c.config["options"] = {{"need_weights", true}};
  return c;
}

TEST(Parity, LlamaAttention) {
  Rng r;
  SCOPED_TRACE(r.trace());
  // GQA ratio / MQA, each with both head widths, with and without biases
  // and position_ids; windows cycle over the eight cases.
  const std::vector<std::pair<int64_t, bool>> groups = {{1, false}, {4, false}, {8, false}, {1, true}};
  const std::vector<Window> windows = {Window::None, Window::Shorter, Window::Longer};
  std::vector<Case> cases;
  for (int i = 0; i < 8; ++i) {
    const auto& [ratio, mqa] = groups[i % 4];
    // Cases i and i + 4 share a group and differ in head_dim, bias and positions.
    const bool second = i >= 4;
    cases.push_back(llama_case(r, i, ratio, mqa, second ? 128 : 64, windows[i % 3], (i % 2 == 1) != second,
                               (i % 2 == 0) != second));
  }
  run_cases(cases, r.seed());
}

// The bias layouts of Hugging Face's configs: Qwen2 (model_type qwen2, no
// attention_bias: q/k/v biased, o_proj not; its sliding_window applies only
// with use_sliding_window), and the explicit qkv_bias / o_proj_bias
// switches in both directions over Llama's attention_bias. The oracle's
// module has exactly the biases its restatement of the config classes
// gives, so a layout mha read differently would change the state_dict's
// names and the torch init's draws.
TEST(Parity, Qwen2AndSeparateBiasSwitches) {
  Rng r;
  SCOPED_TRACE(r.trace());
  std::vector<Case> cases;
  for (int i = 0; i < 6; ++i) {
    Case c = llama_case(r, 100 + i, i % 2 ? 4 : 1, i == 4, i < 3 ? 64 : 128, Window::None, false, i % 2 == 0);
    json& p = c.config["params"];
    p.erase("attention_bias");
    p.erase("sliding_window");
    const int64_t l = c.config["inputs"]["x"].is_string() ? 0 : c.config["inputs"]["x"]["randn"][1].get<int64_t>();
    switch (i) {
      case 0:  // Qwen2's own config: a window that does not apply
      case 3:
        p["model_type"] = "qwen2";
        p["sliding_window"] = 4096;
        p["use_sliding_window"] = false;
        break;
      case 1:  // Qwen2 with the window switched on, shorter than the sequence
        p["model_type"] = "qwen2";
        if (l > 1) {
          p["use_sliding_window"] = true;
          p["sliding_window"] = r.uniform(1, l - 1);
          c.config["inputs"].erase("attention_mask");
        }
        break;
      case 2:  // Qwen2 with its biases switched off again
        p["model_type"] = "qwen2";
        p["qkv_bias"] = false;
        break;
      case 4:  // Llama: attention_bias with o_proj's taken back
        p["attention_bias"] = true;
        p["o_proj_bias"] = false;
        break;
      default:  // Mistral: o_proj biased alone
        p["model_type"] = "mistral";
        p["o_proj_bias"] = true;
        break;
    }
    c.name = "qwen2_bias_" + std::to_string(i);
    cases.push_back(c);
  }
  run_cases(cases, r.seed());
}

}  // namespace
}  // namespace mha::test
