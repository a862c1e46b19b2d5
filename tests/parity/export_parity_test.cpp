// A module built in PyTorch and exported as users do (safetensors, numpy.savez
// or a folder of NAME.npy) runs unchanged in mha and gives the module's own
// output. Seed 003's spelling (W_q, output_projection, and the causal mask it
// registers as a buffer, hence in its state_dict) is exported by seed 003's
// own classes.
#include <string>
#include <vector>

#include "parity/parity.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

// export() in the three formats; every seed's classes, seed 003's spellings
// included, come from the oracle.
const char* kPrelude = R"PY(
import sys
import torch
from torch import nn
sys.path.insert(0, SCRIPTS)
from torch_oracle import *

def export(state_dict, fmt):
    sd = {k: v.detach().contiguous() for k, v in state_dict.items()}
    if fmt == 'safetensors':
        write_safetensors('w.safetensors', sd)
    elif fmt == 'npz':
        np.savez('w.npz', **{k: v.numpy() for k, v in sd.items()})
    else:
        os.makedirs('w')
        for k, v in sd.items():
            np.save(os.path.join('w', k + '.npy'), v.numpy())

def save_input(name, a):
    np.save(name + '.npy', a)
    return torch.from_numpy(a)
)PY";

json weights_for(const std::string& fmt) {
  if (fmt == "dir") return {{"dir", "w"}};
  return {{"file", "w." + fmt}};
}

// One module: `construct` and `forward` are Python expressions (m is the
// module, x/q/k/v the saved inputs); the forward's output becomes expected.npy.
Case export_case(Rng& r, const std::string& name, const std::string& fmt, json config, const std::string& construct,
                 const std::string& inputs, const std::string& forward, const std::string& state) {
  Case c;
  c.name = name + "_" + fmt;
  config["weights"] = weights_for(fmt);
  c.config = config;
  c.setup = "torch.manual_seed(" + std::to_string(r.draw_seed()) + ")\nm = " + construct + "\n" +
            "if m is not None:\n    m.eval()\n" + inputs + "with torch.no_grad():\n    y = " + forward + "\n" +
            "np.save('expected.npy', y.numpy())\nexport(" + state + ", '" + fmt + "')\n";
  c.expected = "expected.npy";
  return c;
}

std::string s(int64_t v) { return std::to_string(v); }
std::string py(bool b) { return b ? "True" : "False"; }

std::vector<Case> cases(Rng& r) {
  const std::vector<std::string> formats = {"safetensors", "npz", "dir"};
  int64_t next = r.uniform(0, 2);  // every format in every run
  auto fmt = [&] { return formats[next++ % 3]; };
  std::vector<Case> out;

  const int64_t b = r.uniform(1, 3), l = r.uniform(1, 10), ctx = l + r.uniform(0, 3), d_in = r.uniform(1, 12);
  const int64_t heads = r.uniform(1, 4), d_out = heads * r.uniform(1, 5);
  const bool qkv_bias = r.coin();
  const std::string x = "x = save_input('x', f32(" + py_shape({b, l, d_in}) + "))\n";
  const json x_in = {{"x", "x.npy"}};
  const std::string args = s(d_in) + ", " + s(d_out) + ", " + s(ctx) + ", 0.0";
  auto book = [&](const char* variant, bool with_heads, const char* in_name, const char* out_name) {
    json p = {{in_name, d_in}, {out_name, d_out}, {"context_length", ctx}, {"qkv_bias", qkv_bias}};
    if (with_heads) p["num_heads"] = heads;
    return json{{"variant", variant}, {"params", p}, {"inputs", x_in}};
  };
  const std::string tail = (", qkv_bias=" + py(qkv_bias) + ")");
  const std::string nh = ", " + s(heads);
  for (const char* cls : {"CausalAttention003", "CausalAttention"})
    out.push_back(export_case(r, cls, fmt(), book("causal_attention", false, "dimension_inputs", "dimension_outputs"),
                              std::string(cls) + "(" + args + tail, x, "m(x)", "m.state_dict()"));
  for (const char* cls : {"MultiHeadAttentionWrapper003", "MultiHeadAttentionWrapper"})
    out.push_back(export_case(r, cls, fmt(), book("mha_wrapper", true, "dimensions_in", "dimensions_out"),
                              std::string(cls) + "(" + args + nh + tail, x, "m(x)", "m.state_dict()"));
  for (const char* cls : {"MultiHeadAttention003", "MultiHeadAttention"})
    out.push_back(export_case(r, cls, fmt(), book("mha_causal", true, "d_in", "d_out"),
                              std::string(cls) + "(" + args + nh + tail, x, "m(x)", "m.state_dict()"));

  const int64_t d_model = heads * r.uniform(1, 6);
  const std::string xm = "x = save_input('x', f32(" + py_shape({b, l, d_model}) + "))\n";
  for (const auto& [variant, cls] : {std::pair{"mha", "AiEdgeMultiHeadAttention"}, {"mha_fused_qkv", "MultiHeadAttentionV2"}}) {
    json cfg = {{"variant", variant}, {"params", {{"d_model", d_model}, {"n_head", heads}}}, {"inputs", x_in}};
    out.push_back(export_case(r, cls, fmt(), cfg, std::string(cls) + "(" + s(d_model) + nh + ")", xm, "m(x)",
                              "m.state_dict()"));
  }

  // nn.MultiheadAttention, sequence-first, with separate key/value widths.
  const int64_t kdim = r.coin() ? d_model : r.uniform(1, 9), vdim = r.coin() ? d_model : r.uniform(1, 9);
  const int64_t src = r.uniform(1, 10);
  const bool bias_kv = r.coin();
  json tp = {{"embed_dim", d_model}, {"num_heads", heads}, {"kdim", kdim}, {"vdim", vdim}, {"add_bias_kv", bias_kv}};
  json tcfg = {{"variant", "torch_mha"}, {"params", tp},
               {"inputs", {{"query", "q.npy"}, {"key", "k.npy"}, {"value", "v.npy"}}}};
  std::string qkv = "q = save_input('q', f32(" + py_shape({l, b, d_model}) + "))\nk = save_input('k', f32(" +
                    py_shape({src, b, kdim}) + "))\nv = save_input('v', f32(" + py_shape({src, b, vdim}) + "))\n";
  out.push_back(export_case(r, "MultiheadAttention", fmt(), tcfg,
                            "nn.MultiheadAttention(" + s(d_model) + nh + ", kdim=" + s(kdim) + ", vdim=" + s(vdim) +
                                ", add_bias_kv=" + py(bias_kv) + ")",
                            qkv, "m(q, k, v)[0]", "m.state_dict()"));

  // Seed 002 has no module: its weights are tensors drawn with torch.rand.
  const std::string hidden = s(d_model);
  const std::string w002 =
      "w = {n + s: torch.rand(" + hidden + ", " + hidden + ") if s == '_weight' else torch.rand(" + hidden +
      ") for n in ('query', 'key', 'value', 'output') for s in ('_weight', '_bias')}\n";
  json ttnn = {{"params", {{"hidden_size", d_model}, {"num_heads", heads}}}, {"inputs", x_in}};
  std::string xs = "x = save_input('x', f32(" + py_shape({b, l, d_model}) + ", 0.05))\n" + w002;
  ttnn["variant"] = "ttnn_mha";
  out.push_back(export_case(r, "multi_head_attention", fmt(), ttnn, "None", xs,
                            "multi_head_attention(x, None, **w, num_heads=" + s(heads) + ")", "w"));
  ttnn["variant"] = "ttnn_mha_fused";
  const std::string fused =
      "{'fused_qkv_weight': torch.cat([w['query_weight'], w['key_weight'], w['value_weight']], dim=-1), "
      "'fused_qkv_bias': torch.cat([w['query_bias'], w['key_bias'], w['value_bias']], dim=-1), "
      "'self_output_weight': w['output_weight'], 'self_output_bias': w['output_bias']}";
  out.push_back(export_case(r, "optimized_multi_head_attention", fmt(), ttnn, "None", xs + "fw = " + fused + "\n",
                            "optimized_multi_head_attention(x, None, **fw, num_heads=" + s(heads) + ")", "fw"));
  return out;
}

TEST(ParityExport, ModulesRunUnchanged) {
  Rng r;
  SCOPED_TRACE(r.trace());
  std::string prelude = "SCRIPTS = " + json(source_dir() + "/scripts").dump() + "\n" + kPrelude;
  run_cases(cases(r), r.seed(), prelude);
}

}  // namespace
}  // namespace mha::test
