#include "parallel/ring_io.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "init/torch_generator.h"
#include "util/error.h"

namespace mha::parallel {

namespace {

bool ends_with_npy(const std::string& s) {
  if (s.size() < 4) return false;
  std::string tail = s.substr(s.size() - 4);
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".npy";
}

// A ring run that streams: the source, and the inputs the checks are made on.
struct StreamPlan {
  RowSource source;
  AttentionInputs checks;
};

// nullopt when the run does not stream (prepare_ring_input).
std::optional<StreamPlan> plan_stream(const PreparedRun& model) {
  const RunConfig& c = model.config;
  if (c.inputs.size() != 1 || c.inputs[0].name != "x" || !model.variant->self_attends_x()) return std::nullopt;
  const InputConfig& ic = c.inputs[0];
  StreamPlan plan;
  DType dt = DType::F32;
  switch (ic.kind) {
    case InputConfig::Kind::Rand:
    case InputConfig::Kind::Randn:
      plan.source.kind = ic.kind == InputConfig::Kind::Rand ? RowSourceKind::Rand : RowSourceKind::Randn;
      plan.source.seed = c.inputs_seed;
      plan.source.shape = ic.shape;
      break;
    case InputConfig::Kind::File: {
      if (!ends_with_npy(ic.path) || io::tensor_spec_file(ic.path) != ic.path) return std::nullopt;
      const io::NpyRows file(ic.path);  // a bad file is reported here, as read_tensor would
      plan.source.npy = ic.path;
      plan.source.shape = file.shape();
      dt = file.dtype();
      break;
    }
  }
  const Shape& shape = plan.source.shape;
  // Other dtypes are widened when loaded: read whole, as prepare_run would.
  if (shape.size() != 3 || (dt != DType::F32 && dt != DType::F64)) return std::nullopt;
  Shape check_shape = shape;
  if (shape_numel(shape) > (int64_t{1} << 20)) check_shape[1] = std::min<int64_t>(shape[1], 8);
  AttentionInputs in = model.variant->build_inputs({{ic.name, Tensor(dt, check_shape)}}, model.options);
  in.dropout_seed = c.inputs_seed;
  validate_inputs(model.spec, in);
  plan.checks = std::move(in);
  return plan;
}

}  // namespace

RingInput prepare_ring_input(PreparedRun& run) {
  try {
    std::optional<StreamPlan> plan = plan_stream(run);
    if (!plan) {
      prepare_inputs(run);
      return {};
    }
    run.inputs = std::move(plan->checks);
    run.input_state = InputState::Ready;
    return RingInput{std::move(plan->source)};
  } catch (const InputError& e) {
    throw InputError(run.config.file + ": " + e.what());  // which config the input belongs to
  }
}

Tensor source_rows(const RowSource& source, const Chunks& chunks, DType dt) {
  switch (source.kind) {
    case RowSourceKind::Rand:
    case RowSourceKind::Randn: {
      TorchGenerator gen(source.seed);
      return gen.rows(source.shape, chunks, source.kind == RowSourceKind::Randn).cast(dt);
    }
    case RowSourceKind::Sent: break;
  }
  const io::NpyRows file(source.npy);
  if (file.shape() != source.shape)
    throw InputError(source.npy + ": changed while read: shape " + shape_str(file.shape()) + ", was " +
                     shape_str(source.shape));
  return file.read(chunks).cast(dt);
}

OutputSink::OutputSink(const Shape& shape, DType dtype, bool keep_whole, const std::string& file)
    : shape_(shape), keep_whole_(keep_whole) {
  const int64_t L = shape.at(1);
  if (keep_whole) whole_ = Tensor(dtype, shape);
  edges_.shape = shape;
  edges_.dtype = dtype;
  for (int64_t l = 0; l < L; ++l)
    if (L <= 6 || l < 3 || l >= L - 3) edges_.index.push_back(l);
  Shape es = shape;
  es[1] = static_cast<int64_t>(edges_.index.size());
  edges_.rows = Tensor(dtype, es);
  if (!file.empty()) file_.emplace(file, dtype, shape);
}

void OutputSink::put(const uint8_t* rows, const Chunks& chunks) {
  const int64_t B = shape_[0], L = shape_[1], K = static_cast<int64_t>(edges_.index.size());
  int64_t n = 0;
  for (const auto& c : chunks) n += c.second;
  const std::size_t row = static_cast<std::size_t>(shape_numel(shape_) / std::max<int64_t>(B * L, 1)) *
                          dtype_size(edges_.dtype);
  for (int64_t b = 0; b < B; ++b) {
    int64_t li = 0;
    for (const auto& [start, len] : chunks) {
      const uint8_t* src = rows + (b * n + li) * row;
      if (file_) file_->write(b, start, len, src);
      if (keep_whole_) std::memcpy(whole_.raw() + (b * L + start) * row, src, len * row);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t l = edges_.index[k];
        if (l >= start && l < start + len)
          std::memcpy(edges_.rows.raw() + (b * K + k) * row, src + (l - start) * row, row);
      }
      li += len;
    }
  }
}

void OutputSink::close() {
  if (file_) file_->close();
}

}  // namespace mha::parallel
