#include "backends/ttsim/ops/op_table.h"

#include <cmath>

#include "ttsim/formats.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::ttsim {

// Each defined in ops/op_*.cpp.
extern const TtOpDesc kOpMatmul, kOpLinear, kOpAdd, kOpMultiply, kOpSoftmax, kOpExp, kOpReciprocal, kOpToDevice,
    kOpSdpa, kOpChunkedSdpa, kOpFlashMlaPrefill, kOpChunkedFlashMlaPrefill;
extern const TtOpDesc kOpSdpaDecode, kOpFlashMlaDecode, kOpUpdateCache, kOpPagedFusedUpdateCache, kOpFillCache,
    kOpPagedFillCache, kOpRotaryLlama, kOpRotaryLlamaFusedQk;  // ops/op_decode.cpp, ops/sdpa_decode
extern const TtOpDesc kOpRmsNorm;  // ops/rms_norm/rms_norm.cpp

const std::vector<const TtOpDesc*>& tt_ops() {
  static const std::vector<const TtOpDesc*> ops = {
      &kOpMatmul,          &kOpLinear,       &kOpAdd,         &kOpMultiply,
      &kOpSoftmax,         &kOpExp,          &kOpReciprocal,  &kOpToDevice,
      &kOpSdpa,            &kOpChunkedSdpa,  &kOpFlashMlaPrefill, &kOpChunkedFlashMlaPrefill,
      &kOpSdpaDecode,      &kOpFlashMlaDecode, &kOpUpdateCache, &kOpPagedFusedUpdateCache,
      &kOpFillCache,       &kOpPagedFillCache, &kOpRotaryLlama, &kOpRotaryLlamaFusedQk,
      &kOpRmsNorm};
  return ops;
}

const TtOpDesc& tt_op(const std::string& name) {
  std::string all;
  for (const TtOpDesc* d : tt_ops()) {
    if (name == d->name) return *d;
    all += std::string(all.empty() ? "" : ", ") + d->name;
  }
  throw InputError("unknown op '" + printable(name) + "': expected one of " + all);
}

std::string tt_op_synopsis() {
  std::string s;
  for (const TtOpDesc* d : tt_ops()) s += std::string(s.empty() ? "" : ", ") + d->name + " " + d->operands;
  return s;
}

std::string tt_op_help() {
  std::string s = "Ops (inputs in order; what runs; TT-NN's defaults):\n";
  for (const TtOpDesc* d : tt_ops()) {
    s += std::string("  ") + d->name + " " + d->operands + "\n      " + d->summary + "\n      defaults: " +
         d->defaults + "\n";
    for (const OpParam& p : d->params) s += std::string("      --option ") + p.key + "=: " + p.help + "\n";
  }
  return s;
}

std::string op_flag_name(const std::string& key) {
  std::string f = "--" + key;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::vector<OpParam> tt_op_flags() {
  std::vector<OpParam> flags;
  std::vector<std::string> ops;  // per flag: the ops that take it
  for (const TtOpDesc* d : tt_ops())
    for (const OpParam& p : d->params) {
      if (p.flag == FlagKind::None) continue;
      size_t i = 0;
      while (i < flags.size() && flags[i].key != p.key) ++i;
      if (i == flags.size()) {
        flags.push_back(p);
        ops.emplace_back();
      }
      ops[i] += std::string(ops[i].empty() ? "" : ", ") + d->name;
    }
  for (size_t i = 0; i < flags.size(); ++i) flags[i].help = ops[i] + ": " + flags[i].help;
  return flags;
}

bool block_float(DataFormat f) { return bfp_magnitude_bits(f) > 0; }

std::string broadcast_problem(const Shape& a, const Shape& b) {
  // Same last dim; one row or a's rows; leading dims right-aligned, each 1
  // or a's. 1-D shapes are one row.
  const size_t na = a.size(), nb = b.size();
  const int64_t a_rows = na >= 2 ? a[na - 2] : 1, b_rows = nb >= 2 ? b[nb - 2] : 1;
  bool ok = a.back() == b.back() && (b_rows == 1 || b_rows == a_rows);
  const size_t la = na >= 2 ? na - 2 : 0, lb = nb >= 2 ? nb - 2 : 0;
  if (lb > la) ok = false;
  for (size_t d = 0; ok && d < lb; ++d)
    if (b[d] != 1 && b[d] != a[d + la - lb]) ok = false;
  if (ok) return "";
  return "cannot broadcast B " + shape_str(b) + " onto A " + shape_str(a) +
         " (expected B's last dim equal to A's, one row or A's rows, leading dims 1 or A's)";
}

namespace {
[[noreturn]] void bad_param(const char* key, const std::string& expected, const nlohmann::ordered_json& v) {
  throw InputError(std::string("op options.") + key + ": expected " + expected + ", found " + v.dump());
}
}  // namespace

int64_t param_int(const nlohmann::ordered_json& p, const char* key, int64_t dflt) {
  if (!p.contains(key)) return dflt;
  const auto& v = p[key];
  if (!v.is_number_integer()) bad_param(key, "an integer", v);
  return v.get<int64_t>();
}

bool param_bool(const nlohmann::ordered_json& p, const char* key, bool dflt) {
  if (!p.contains(key)) return dflt;
  const auto& v = p[key];
  if (!v.is_boolean()) bad_param(key, "true or false", v);
  return v.get<bool>();
}

std::optional<double> param_number(const nlohmann::ordered_json& p, const char* key) {
  if (!p.contains(key)) return std::nullopt;
  const auto& v = p[key];
  if (!v.is_number()) bad_param(key, "a number", v);
  return v.get<double>();
}

std::vector<float> param_bf16_values(const nlohmann::ordered_json& p, const char* key, const char* what) {
  std::vector<float> out;
  if (!p.contains(key)) return out;
  const auto& v = p[key];
  const std::string expected = std::string("an array of finite numbers, ") + what;
  if (!v.is_array() || v.empty()) bad_param(key, expected, v);
  for (const auto& x : v) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) bad_param(key, expected, x);
    out.push_back(host_round_bf16(static_cast<float>(x.get<double>())));
  }
  return out;
}

void require_4d(const OpCheck& c, const char* op) {
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].ndim() != 4)
      throw InputError(c.names[i] + ": " + op + " takes 4-D operands, found shape " + shape_str(c.inputs[i].shape()));
}

void check_positions(const std::vector<int64_t>& pos, bool skip_ok) {
  for (int64_t p : pos)
    if (p < (skip_ok ? -1 : 0))
      throw InputError(std::string("op options.cur_pos: expected an array of positions (integers >= ") +
                       (skip_ok ? "-1" : "0") + "), found " + fields::Codec<std::vector<int64_t>>::to_json(pos).dump());
}

void check_page_table(const std::vector<std::vector<int64_t>>& pt) {
  for (const auto& row : pt) {
    bool ok = row.size() == pt.front().size();
    for (int64_t id : row) ok = ok && id >= 0;
    if (!ok)
      throw InputError("op options.page_table: expected [b][blocks] non-negative integers (rows of equal length), "
                       "found " + fields::Codec<std::vector<int64_t>>::to_json(row).dump().substr(0, 80));
  }
}

std::optional<std::string> param_string(const nlohmann::ordered_json& p, const char* key) {
  if (!p.contains(key)) return std::nullopt;
  const auto& v = p[key];
  if (!v.is_string()) bad_param(key, "a string", v);
  return v.get<std::string>();
}

}  // namespace mha::ttsim
