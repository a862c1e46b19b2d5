#pragma once
// A variant is one seed notebook's module. It only maps the module's
// constructor arguments (params), state_dict names and forward arguments onto
// the canonical AttentionSpec / AttentionInputs (model/attention.h), and maps
// results back to the module's conventions. It never computes attention.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/json_util.h"
#include "model/attention.h"

namespace mha {

using TensorMap = std::map<std::string, Tensor>;

// Forward arguments from the config's "options" object.
struct ForwardOptions {
  bool need_weights = false;
  bool average_attn_weights = true;
  bool is_causal = false;
  bool training = false;
};

// One state_dict entry: its name as the seed module spells it, the shape,
// and other spellings accepted on load (seed 003: W_q for W_query, ...).
struct WeightSlot {
  std::string name;
  Shape shape;
  std::vector<std::string> aliases;
  // A registered buffer (seed 003's causal `mask`): may be present in an
  // exported state_dict, is shape-checked, and is never used.
  bool buffer = false;
};

struct InputSlot {
  std::string name;
  bool required = true;
};

class Variant {
 public:
  virtual ~Variant() = default;
  virtual std::string name() const = 0;
  virtual std::vector<WeightSlot> weight_slots() const = 0;
  // state_dict after torch.manual_seed(seed) and constructing the module.
  virtual NamedTensors init_torch(uint64_t seed) const = 0;
  // torch.rand weights in the seed's listing order (seed 002's variants only).
  virtual NamedTensors init_rand(uint64_t seed) const;
  // The inputs the module's forward takes; build_inputs rejects others.
  virtual std::vector<InputSlot> input_slots() const = 0;
  virtual ForwardOptions parse_options(const ordered_json& options) const;
  // `w` holds every slot by its canonical name, float32, shapes checked.
  // Forward options that change the computation (is_causal) arrive here too.
  virtual AttentionSpec build_spec(const TensorMap& w, const ForwardOptions& opt) const = 0;
  // `inputs` holds the inputs the config gave, by name, as loaded. Unknown
  // names and missing required inputs are rejected here, against
  // input_slots(), before the variant maps them.
  AttentionInputs build_inputs(const TensorMap& inputs, const ForwardOptions& opt) const;
  // Back to the module's conventions (batch_first=False, averaged weights,
  // no batch dim for an unbatched call). `in` is what build_inputs gave for
  // this call: a variant keeps no state between the two.
  virtual AttentionResult finish(AttentionResult r, const ForwardOptions& opt, const AttentionInputs& in) const;
  // True when forward, given only its input "x" [B, L, E], attends x to
  // itself unchanged (query = key = value = x, no mask or positions derived
  // from it, float32 and float64 kept as they are) and finish() returns the
  // output as it is: a ring run then hands each rank only its rows of x
  // (parallel/ring_io.h). Default: no.
  virtual bool self_attends_x() const { return false; }

 protected:
  // Maps inputs whose names build_inputs has already checked.
  virtual AttentionInputs map_inputs(const TensorMap& inputs, const ForwardOptions& opt) const = 0;
};

// Whether a variant's mask is causal: always, never, or chosen by a forward option.
enum class Causality { Never, Always, Option };

// A shape a generic driver asks for (`mha bench` rows).
struct ShapeRequest {
  int64_t hidden = 0, heads = 1, seq = 1;
  int64_t kv_heads = 0;  // grouped-query variants; 0: as many as heads
  bool causal = false;
};

// How to build a variant at a shape: its params, forward options, and the
// input names the one self-attention tensor x fills; `why_not` is set
// (and the rest left empty) when the variant cannot take the shape
// (causality it does not have). Unknown variant: InputError.
struct ShapeRecipe {
  ordered_json params = ordered_json::object();
  ordered_json options = ordered_json::object();
  std::vector<std::string> x_inputs;
  std::string why_not;
};
ShapeRecipe recipe_for_shape(const std::string& variant, const ShapeRequest& shape);

// `params` is the config's params object (path "params" for messages).
std::unique_ptr<Variant> make_variant(const std::string& name, const ordered_json& params);
std::vector<std::string> variant_names();

// Matches loaded tensors to the variant's slots (aliases resolved, cast to
// float32); missing, extra or misshapen tensors are InputErrors naming the
// tensor, the expected and the found shape. `source` names the file.
TensorMap bind_weights(const Variant& v, const NamedTensors& loaded, const std::string& source);

}  // namespace mha
