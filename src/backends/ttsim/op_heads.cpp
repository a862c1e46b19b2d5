#include "backends/ttsim/op_heads.h"

#include <cstring>

#include "backends/ttsim/ops/sdpa_decode/sdpa_decode_kernel.h"
#include "backends/ttsim/ttsim_options.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// The axis of Q, the mask and the output that counts query heads.
int64_t head_axis(const std::string& op) { return op == "sdpa-decode" ? 2 : 1; }

// t's indices [start, start + count) on `axis`, in t's dtype and bits.
Tensor slice_axis(const Tensor& t, int64_t axis, int64_t start, int64_t count) {
  int64_t outer = 1, inner = dtype_size(t.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.ndim(); ++d) inner *= t.dim(d);
  Shape shape = t.shape();
  shape[axis] = count;
  Tensor r(t.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(r.raw() + o * count * inner, t.raw() + (o * t.dim(axis) + start) * inner, count * inner);
  return r;
}

void require_4d(const std::string& op, const OpInput& in, const char* role) {
  if (in.tensor.ndim() != 4)
    throw InputError(op + ": " + role + " (" + in.name + ") must have 4 dimensions to split its heads across ranks, "
                     "found shape " + shape_str(in.tensor.shape()));
}

// The whole decode op's cores per head (sdpa_decode_grid on its grid and
// its max_cores_per_head_batch), which every share keeps.
int64_t decode_cores_per_head(const OpRequest& req) {
  nlohmann::ordered_json backend = nlohmann::ordered_json::object();
  SdpaDecodeConfig cfg;
  for (const auto& [key, v] : req.options.items()) {
    if (key == "max_cores_per_head_batch" && v.is_number_integer()) cfg.max_cores_per_head_batch = v.get<int>();
    bool own = false;
    for (const OpParam& p : tt_op(req.op).params) own = own || key == p.key;
    if (!own) backend[key] = v;
  }
  const TtOptions o = parse_tt_options(backend, "op options");
  const Grid g = o.core_grid.value_or(Grid{o.device.grid_y, o.device.grid_x});
  cfg.grid_y = g.y;
  cfg.grid_x = g.x;
  return sdpa_decode_grid(cfg, req.inputs[0].tensor.dim(1), req.inputs[1].tensor.dim(1)).cores_per_head;
}

}  // namespace

bool op_splits_heads(const std::string& op) { return op == "sdpa" || op == "sdpa-decode"; }

OpRequest op_heads_share(const OpRequest& req, int64_t part, int64_t parts) {
  const std::string& op = req.op;
  if (!op_splits_heads(op))
    throw InputError("mha op " + op + " runs in one process: only sdpa and sdpa-decode split their heads across " +
                     std::to_string(parts) + " MPI ranks (run it without mpirun)");
  check_op_inputs(op, static_cast<int>(req.inputs.size()), req.scalar.has_value());
  const char* roles[] = {"Q", "K", "V", "MASK"};
  for (size_t i = 0; i < req.inputs.size(); ++i) require_4d(op, req.inputs[i], roles[i]);
  const int64_t qa = head_axis(op), H = req.inputs[0].tensor.dim(qa), Hkv = req.inputs[1].tensor.dim(1);
  if (req.inputs[2].tensor.dim(1) != Hkv)
    throw InputError(op + ": K has " + std::to_string(Hkv) + " key/value heads (axis 1), V has " +
                     std::to_string(req.inputs[2].tensor.dim(1)));
  if (Hkv % parts != 0 || H % parts != 0)
    throw InputError(op + ": " + std::to_string(H) + " query heads over " + std::to_string(Hkv) +
                     " key/value heads do not split into " + std::to_string(parts) +
                     " ranks of whole key/value groups (the ranks must divide the key/value heads)");
  const int64_t h = H / parts, g = Hkv / parts;
  OpRequest s = req;
  s.inputs[0].tensor = slice_axis(req.inputs[0].tensor, qa, part * h, h);
  for (int i : {1, 2}) s.inputs[i].tensor = slice_axis(req.inputs[i].tensor, 1, part * g, g);
  if (req.inputs.size() == 4 && req.inputs[3].tensor.dim(qa) == H && H > 1)
    s.inputs[3].tensor = slice_axis(req.inputs[3].tensor, qa, part * h, h);
  const auto sink = req.options.find("attention_sink");
  if (sink != req.options.end() && sink->is_array() && static_cast<int64_t>(sink->size()) == H) {
    nlohmann::ordered_json mine = nlohmann::ordered_json::array();
    for (int64_t i = part * h; i < (part + 1) * h; ++i) mine.push_back((*sink)[i]);
    s.options["attention_sink"] = mine;
  }
  if (op == "sdpa-decode") s.options["max_cores_per_head_batch"] = decode_cores_per_head(req);
  return s;
}

Tensor join_op_heads(const std::string& op, const std::vector<Tensor>& outputs) {
  const int64_t axis = head_axis(op);
  const Tensor& first = outputs.front();
  int64_t outer = 1, inner = dtype_size(first.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= first.dim(d);
  for (int64_t d = axis + 1; d < first.ndim(); ++d) inner *= first.dim(d);
  Shape shape = first.shape();
  shape[axis] = 0;
  for (const Tensor& t : outputs) shape[axis] += t.dim(axis);
  Tensor r(first.dtype(), shape);
  int64_t at = 0;
  for (const Tensor& t : outputs) {
    const int64_t n = t.dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) std::memcpy(r.raw() + (o * shape[axis] * inner) + at, t.raw() + o * n, n);
    at += n;
  }
  return r;
}

}  // namespace mha::ttsim
