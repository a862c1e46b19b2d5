// llama_attention's params (variants/llama_attention.cpp) through
// make_variant, whose checked sizes refuse products that overflow or exceed
// physical memory (util/checked_size.h): every accepted params object must
// give weight slots whose element counts fit in 64 bits. When the weights are
// small (at most 2^20 elements), zero weights of the slots' shapes are bound
// and the spec built and validated against a [1, 3, hidden] input: spec
// building only, nothing is run.
#include <limits>

#include "util/json_util.h"
#include "fuzz_common.h"
#include "variants/variant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  ordered_json p;
  try {
    p = parse_json_text(fuzz::as_view(data, size), "fuzz.json", "params");
  } catch (const InputError&) {
    return 0;
  }
  fuzz::run_expecting_input_errors([&] {
    auto v = make_variant("llama_attention", p);
    int64_t total = 0;
    NamedTensors zeros;
    for (const WeightSlot& slot : v->weight_slots()) {
      int64_t n = 1;
      for (int64_t d : slot.shape) {
        fuzz::require(d >= 1, "slot dims positive");
        fuzz::require(n <= std::numeric_limits<int64_t>::max() / d, "slot element count fits in 64 bits");
        n *= d;
      }
      total += n;
    }
    if (total > (int64_t{1} << 20)) return;
    int64_t hidden = 0;
    for (const WeightSlot& slot : v->weight_slots()) {
      if (slot.buffer) continue;
      zeros.emplace_back(slot.name, Tensor(DType::F32, slot.shape));
      if (slot.name == "q_proj.weight") hidden = slot.shape[1];
    }
    const TensorMap w = bind_weights(*v, zeros, "fuzz");
    const ForwardOptions opt = v->parse_options(ordered_json::object());
    const AttentionSpec spec = v->build_spec(w, opt);
    TensorMap inputs;
    inputs["x"] = Tensor(DType::F32, {1, 3, hidden});
    validate_inputs(spec, v->build_inputs(inputs, opt));
  });
  return 0;
}
