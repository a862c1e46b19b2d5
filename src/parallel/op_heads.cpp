#include "parallel/op_heads.h"

#include <cstring>

#include "backends/ttsim/op_heads.h"
#include "parallel/collective.h"
#include "parallel/wire.h"
#include "parallel/world.h"

namespace mha::parallel {

namespace {

using ttsim::OpRequest;

std::string encode_op(const OpRequest& req) {
  Writer w;
  w.str(req.op);
  w.str(req.options.dump());
  w.i64(req.output_dtype ? static_cast<int64_t>(*req.output_dtype) : -1);
  w.i64(req.scalar.has_value());
  w.f64(req.scalar.value_or(0.0));
  w.i64(static_cast<int64_t>(req.inputs.size()));
  for (const ttsim::OpInput& in : req.inputs) {
    w.str(in.name);
    w.i64(in.dtype ? static_cast<int64_t>(*in.dtype) : -1);
    w.tensor(in.tensor);
  }
  return w.bytes();
}

OpRequest decode_op(const std::string& bytes) {
  Reader r(bytes);
  OpRequest req;
  req.op = r.str();
  req.options = nlohmann::ordered_json::parse(r.str());
  const int64_t out = r.i64();
  if (out >= 0) req.output_dtype = static_cast<ttsim::DataFormat>(out);
  const bool scalar = r.i64() != 0;
  const double s = r.f64();
  if (scalar) req.scalar = s;
  const int64_t n = r.i64();
  for (int64_t i = 0; i < n; ++i) {
    ttsim::OpInput in;
    in.name = r.str();
    const int64_t dt = r.i64();
    if (dt >= 0) in.dtype = static_cast<ttsim::DataFormat>(dt);
    in.tensor = r.tensor();
    req.inputs.push_back(std::move(in));
  }
  return req;
}

// Every rank's output (the same shape on every rank: equal shares) to rank 0.
std::vector<Tensor> gather_outputs(const Tensor& mine) {
  const std::string all = gather_bytes(std::string(reinterpret_cast<const char*>(mine.raw()), mine.nbytes()));
  std::vector<Tensor> out;
  if (rank() != 0) return out;
  for (int r = 0; r < size(); ++r) {
    Tensor t(mine.dtype(), mine.shape());
    std::memcpy(t.raw(), all.data() + r * mine.nbytes(), mine.nbytes());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

ttsim::OpResult run_op_heads(const OpRequest& request, WorkerRelease& release) {
  const int n = size();
  std::vector<OpRequest> shares;
  for (int r = 0; r < n; ++r) shares.push_back(ttsim::op_heads_share(request, r, n));
  release.go(WorkerMode::Op);
  for (int r = 1; r < n; ++r) send_bytes(encode_op(shares[r]), r);
  collectively([] {});  // the workers' receipt
  ttsim::OpResult res;
  collectively([&] { res = ttsim::run_tt_op(shares[0]); });
  res.output = ttsim::join_op_heads(request.op, gather_outputs(res.output));
  for (std::size_t i = 0; i < request.inputs.size(); ++i)
    res.info["inputs"][i]["shape"] = request.inputs[i].tensor.shape();
  res.info["output"]["shape"] = res.output.shape();
  res.info["parallel"] = {{"mode", "heads"}, {"ranks", n}};
  return res;
}

int serve_op_heads() {
  try {
    OpRequest req;
    collectively([&] { req = decode_op(recv_bytes(0)); });
    ttsim::OpResult res;
    collectively([&] { res = ttsim::run_tt_op(req); });
    gather_outputs(res.output);
  } catch (const InputError&) {
    return 2;  // rank 0 reports it
  }
  return 0;
}

}  // namespace mha::parallel
