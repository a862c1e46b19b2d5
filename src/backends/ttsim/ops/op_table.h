#pragma once
// The table of TT-NN ops tt-sim runs one at a time (`mha op`, and any
// pipeline that wants an op with TT-NN's per-op defaults): one descriptor per
// op, each defined in its own file under ops/ and listed once in
// op_table.cpp. `mha op --help` and every "expected one of" message are
// generated from this table.
//
// Adding an op: write ops/op_NAME.cpp defining `extern const TtOpDesc kOpNAME`
// (name, operands, help lines, input counts, its own --option keys, check,
// run), then add `&kOpNAME` to the list in op_table.cpp.
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ttsim_options.h"
#include "tensor/tensor.h"
#include "ttsim/tile.h"
#include "util/fields.h"

namespace mha::ttsim {

// An op-specific --option key (e.g. sdpa's q_chunk_size): parsed by the op
// itself, never by parse_tt_options.
// A param that is also a `mha op` flag (fields::kFlag), by how the flag's
// text becomes the param: an integer (--update-idx 3), comma-separated
// positions (--cur-pos 7,-1), or a tensor file read as an integer table
// (--page-table t.npy).
enum class FlagKind { None, Integer, Positions, TableFile };

struct OpParam {
  std::string key;
  std::string help;  // "an integer multiple of 32 (default 32)"
  FlagKind flag = FlagKind::None;
};

template <class T>
FlagKind flag_kind() {
  if constexpr (std::is_same_v<T, std::vector<std::vector<int64_t>>>) return FlagKind::TableFile;
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return FlagKind::Positions;
  else return FlagKind::Integer;
}

// The user keys of a struct with a field list (util/fields.h).
struct OpParamVisitor {
  std::vector<OpParam> params;
  template <class T>
  void operator()(const char* name, const T& v, const char* help, unsigned flags = fields::kNone,
                  const fields::Parser<T>& = nullptr) {
    if (flags & fields::kDerived) return;
    fields::HelpVisitor h;
    h(name, v, help, flags);
    params.push_back({name, h.lines.front().second, (flags & fields::kFlag) ? flag_kind<T>() : FlagKind::None});
  }
};

// An attributes struct's user keys as the op's params.
template <class Attrs>
std::vector<OpParam> op_params_of(Attrs a) {
  OpParamVisitor v;
  a.fields(v);
  return v.params;
}

// An input as an op's check sees it: its shape, never its values (an input
// already on the device, an earlier op's output, has no host values).
struct OpOperand {
  Shape dims;
  const Shape& shape() const { return dims; }
  int ndim() const { return static_cast<int>(dims.size()); }
  int64_t numel() const { return shape_numel(dims); }
};

// What an op's check sees before any input is converted.
struct OpCheck {
  const std::vector<OpOperand>& inputs;    // the op's order
  const std::vector<std::string>& names;   // their file specs, for messages
  const nlohmann::ordered_json& params;    // the op's own --option keys only
  bool scalar;                             // --scalar given
};

// An op's input tiles: each converted from host values, or an earlier op's
// output taken as is (not copied: a KV cache is most of a step's data).
class OpTiles {
 public:
  explicit OpTiles(std::vector<const TileTensor*> p) : p_(std::move(p)) {}
  const TileTensor& operator[](size_t i) const { return *p_[i]; }
  size_t size() const { return p_.size(); }

 private:
  std::vector<const TileTensor*> p_;
};

// What an op's run gets: inputs already converted as ttnn.from_torch
// converts them (dtype, TILE layout), the device, the backend options (unset
// keys: the op's TT-NN default), its own params, and the report to fill in
// (compute_kernel_config and anything op-specific).
struct OpCall {
  TtDevice& dev;
  const TtOptions& opt;
  const OpTiles& in;
  DataFormat out_format;                  // --output-dtype, else input 0's dtype
  const nlohmann::ordered_json& params;
  std::optional<double> scalar;
  std::string program;                    // "ttnn.matmul": the program-cache name
  nlohmann::json& info;
};

struct TtOpDesc {
  const char* name;      // "matmul"
  const char* operands;  // "A B [BIAS]" (messages, --help)
  const char* summary;   // what runs, one line for --help
  const char* defaults;  // TT-NN's defaults for the op, one line for --help
  int min_inputs, max_inputs;
  bool takes_scalar = false;  // multiply: A --scalar S instead of A B
  bool host_only = false;     // to-device: no compute config, no --output-dtype
  std::vector<OpParam> params = {};
  // Shape and param rules, InputError on a violation (nullptr: none beyond
  // the input count). Runs before any conversion.
  void (*check)(const OpCheck&) = nullptr;
  // The logical shape input i is tiled with (a linear's bias becomes the
  // (1, N) row); nullptr: the file's shape.
  Shape (*device_shape)(int i, const Shape& file_shape) = nullptr;
  TileTensor (*run)(OpCall&) = nullptr;
};

// The params that are flags (`mha op --cur-pos`), once each over all ops;
// help: "sdpa-decode, update-cache: HELP".
std::vector<OpParam> tt_op_flags();
// "cur_pos" -> "--cur-pos".
std::string op_flag_name(const std::string& key);

// Every op, in --help order.
const std::vector<const TtOpDesc*>& tt_ops();
// The op named `name`; InputError "unknown op '...': expected one of ...".
const TtOpDesc& tt_op(const std::string& name);
// "matmul A B, linear A B [BIAS], ..." and the per-op --help block.
std::string tt_op_synopsis();
std::string tt_op_help();

// Shared by the ops' checks: a tensor with an element, floating point.
bool block_float(DataFormat f);
// Why b does not broadcast onto a as ttnn.add / ttnn.multiply broadcast, or "".
std::string broadcast_problem(const Shape& a, const Shape& b);
// The param `key` as an integer / bool / string from params (InputError
// naming "op options.KEY" when it has another type), or `dflt`.
int64_t param_int(const nlohmann::ordered_json& params, const char* key, int64_t dflt);
bool param_bool(const nlohmann::ordered_json& params, const char* key, bool dflt);
std::optional<double> param_number(const nlohmann::ordered_json& params, const char* key);
std::optional<std::string> param_string(const nlohmann::ordered_json& params, const char* key);
// The param `key` as a non-empty JSON array of finite numbers, each rounded
// to bfloat16 as ttnn.from_torch(..., bfloat16) does (TT-NN's attention_sink
// tensors); empty when absent.
std::vector<float> param_bf16_values(const nlohmann::ordered_json& params, const char* key, const char* what);

// Every input 4-D, or InputError "NAME: OP takes 4-D operands, found shape ...".
void require_4d(const OpCheck& c, const char* op);
// cur_pos entries >= 0 (>= -1 where `skip_ok`), or InputError naming
// "op options.cur_pos".
void check_positions(const std::vector<int64_t>& pos, bool skip_ok);
// A page table's rows of equal length and non-negative block ids, or
// InputError naming "op options.page_table".
void check_page_table(const std::vector<std::vector<int64_t>>& pt);

}  // namespace mha::ttsim
