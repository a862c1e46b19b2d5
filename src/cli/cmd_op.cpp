// mha op OP INPUT... -o OUT.npy: one TT-NN op on tt-sim. Flags only; the op
// runs in src/backends/ttsim/ttsim_single_op, or under mpirun split by heads
// (src/parallel/op_heads.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "backends/ttsim/ttsim_options.h"
#include "backends/ttsim/ttsim_single_op.h"
#include "cli/commands.h"
#include "cli/key_values.h"
#include "cli/validators.h"
#include "io/output_set.h"
#include "io/tensor_file.h"
#include "parallel/driver.h"
#include "parallel/op_heads.h"
#include "parallel/world.h"
#include "util/checked_size.h"
#include "util/error.h"

namespace mha::cli {

namespace {

struct OpFlags {
  std::string op, output, json, device, dtype, in_dtype[4], output_dtype, math_fidelity, memory_config;
  std::vector<std::string> inputs, options;
  bool fp32_dest_acc_en = false, math_approx_mode = false;
  double scalar = 0;
  // The ops' flag params (--cur-pos, --page-table, ...: op_table.h's
  // tt_op_flags), by param key, as given.
  std::map<std::string, std::string> params;
};

// --cur-pos P,P,...: one integer per user (-1 skips a user).
nlohmann::ordered_json positions_flag(const std::string& flag, const std::string& v) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  size_t i = 0;
  while (i <= v.size()) {
    const size_t j = std::min(v.find(',', i), v.size());
    const std::string item = v.substr(i, j - i);
    char* end = nullptr;
    const long long x = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < -1)
      throw InputError(flag + ": expected comma-separated positions (integers >= 0, or -1 to skip a user), found '" +
                       v + "'");
    out.push_back(x);
    i = j + 1;
  }
  return out;
}

std::string number_str(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// --page-table FILE: a [b, blocks] table of block ids (any integer dtype).
nlohmann::ordered_json page_table_flag(const std::string& spec) {
  const Tensor t = io::read_tensor(spec);
  if (t.ndim() != 2)
    throw InputError(spec + ": expected a page table [b, max_blocks_per_user], found shape " + shape_str(t.shape()));
  if (dtype_is_float(t.dtype()))
    throw InputError(spec + ": expected an integer page table (TT-NN's is int32), found " + dtype_name(t.dtype()));
  const std::vector<double> v = t.to_f64();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int64_t u = 0; u < t.shape()[0]; ++u) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (int64_t j = 0; j < t.shape()[1]; ++j) {
      const double x = v[static_cast<size_t>(u * t.shape()[1] + j)];
      if (!(x >= 0) || x != std::floor(x) || x > 2147483647.0)
        throw InputError(spec + ": expected block ids (non-negative integers), found " + number_str(x) + " at [" +
                         std::to_string(u) + ", " + std::to_string(j) + "]");
      row.push_back(static_cast<int64_t>(x));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// An integer flag's value (--update-idx 3).
nlohmann::ordered_json integer_flag(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw InputError(flag + ": expected an integer, found '" + v + "'");
  return x;
}

// The ops' flag params are spellings of their own params, generated from
// their field lists (op_table.h): --cur-pos is `cur_pos`, --page-table
// `page_table`, ... An op without the param refuses the flag.
void add_param_flags(const OpFlags& f, CLI::App* sub, const ttsim::TtOpDesc& d, nlohmann::ordered_json& o) {
  for (const ttsim::OpParam& flag : ttsim::tt_op_flags()) {
    const std::string name = ttsim::op_flag_name(flag.key);
    if (!sub->count(name)) continue;
    bool takes = false;
    for (const ttsim::OpParam& p : d.params) takes = takes || p.key == flag.key;
    if (!takes) throw InputError(name + ": " + d.name + " does not take it (see mha op --help)");
    const std::string& v = f.params.at(flag.key);
    switch (flag.flag) {
      case ttsim::FlagKind::Positions: o[flag.key] = positions_flag(name, v); break;
      case ttsim::FlagKind::TableFile: o[flag.key] = page_table_flag(v); break;
      default: o[flag.key] = integer_flag(name, v); break;
    }
  }
}

// A dtype flag's value; the error names the flag.
ttsim::DataFormat dtype_flag(const std::string& flag, const std::string& v) {
  try {
    return ttsim::format_from_name(v);
  } catch (const InputError&) {
    throw InputError(flag + ": expected bfloat16, bfloat8_b, bfloat4_b or float32, found '" + v + "'");
  }
}

// The device holds every operand and the output as 32 x 32 tiles of up to
// 4 bytes: refused (one line, the shapes and bytes) when that overflows or
// exceeds this machine's memory, before tt-sim pads or allocates anything.
// matmul / linear's output is A's leading dims x A's rows x B's columns.
void check_op_sizes(const std::string& op, const std::vector<ttsim::OpInput>& inputs) {
  std::string what = "mha op " + op + " on";
  for (const auto& in : inputs) what += " " + shape_str(in.tensor.shape());
  auto tiles = [&](const Shape& s) {
    int64_t n = 1;
    for (std::size_t d = 0; d < s.size(); ++d)
      n = checked_mul(n, d + 2 >= s.size() ? checked_add(s[d], 31, what) / 32 * 32 : s[d], what);
    return n;
  };
  int64_t total = 0;
  for (const auto& in : inputs) total = checked_add(total, tiles(in.tensor.shape()), what);
  if ((op == "matmul" || op == "linear") && inputs.size() >= 2 && inputs[0].tensor.ndim() >= 2 && inputs[1].tensor.ndim() >= 1) {
    Shape out = inputs[0].tensor.shape();
    out.back() = inputs[1].tensor.shape().back();
    total = checked_add(total, tiles(out), what);
  } else if (!inputs.empty()) {
    total = checked_add(total, tiles(inputs[0].tensor.shape()), what);
  }
  check_bytes(total, 4, what);
}

void op_command(const OpFlags& f, CLI::App* sub) {
  parallel::WorkerRelease release;  // under mpirun: the other ranks wait for their share
  ttsim::OpRequest req;
  req.op = ttsim::tt_op(f.op).name;
  // The backend object of a config, from the flags: one parser for both.
  nlohmann::ordered_json& o = req.options;
  if (sub->count("--device")) o["device"] = f.device;
  if (sub->count("--dtype")) o["dtype"] = ttsim::format_name(dtype_flag("--dtype", f.dtype));
  if (sub->count("--math-fidelity")) o["math_fidelity"] = f.math_fidelity;
  if (sub->count("--fp32-dest-acc-en")) o["fp32_dest_acc_en"] = f.fp32_dest_acc_en;
  if (sub->count("--math-approx-mode")) o["math_approx_mode"] = f.math_approx_mode;
  if (sub->count("--memory-config")) o["memory_config"] = f.memory_config;
  o.update(parse_key_values(f.options, "--option"));
  add_param_flags(f, sub, ttsim::tt_op(req.op), o);
  if (sub->count("--scalar")) req.scalar = f.scalar;
  ttsim::check_op_inputs(req.op, static_cast<int>(f.inputs.size()), req.scalar.has_value());
  if (sub->count("--output-dtype")) req.output_dtype = dtype_flag("--output-dtype", f.output_dtype);
  for (int i = 0; i < 4; ++i) {
    const std::string flag = "--in" + std::to_string(i) + "-dtype";
    if (!sub->count(flag)) continue;
    if (i >= static_cast<int>(f.inputs.size()))
      throw InputError(flag + ": " + f.op + " was given " + std::to_string(f.inputs.size()) + " input(s) (" +
                       ttsim::tt_op(req.op).operands + "), so there is no input " + std::to_string(i));
    (void)dtype_flag(flag, f.in_dtype[i]);
  }

  io::OutputSet outs;
  for (const std::string& in : f.inputs) outs.add_input(io::tensor_spec_file(in));
  for (const ttsim::OpParam& flag : ttsim::tt_op_flags())
    if (flag.flag == ttsim::FlagKind::TableFile && sub->count(ttsim::op_flag_name(flag.key)))
      outs.add_input(io::tensor_spec_file(f.params.at(flag.key)));
  outs.add_file("--output", f.output);
  const bool json_file = !f.json.empty() && f.json != "-";
  if (json_file) outs.add_file("--json", f.json);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    ttsim::OpInput in{f.inputs[i], io::read_tensor(f.inputs[i]), std::nullopt};
    if (i < 4 && !f.in_dtype[i].empty()) in.dtype = ttsim::format_from_name(f.in_dtype[i]);
    req.inputs.push_back(std::move(in));
  }
  check_op_sizes(f.op, req.inputs);
  ttsim::OpResult res = parallel::size() > 1 ? parallel::run_op_heads(req, release) : ttsim::run_tt_op(req);
  res.info["output"]["file"] = f.output;
  const std::string json = f.json.empty() ? "" : res.info.dump(2) + "\n";
  outs.stage(f.output, [&](const std::string& tmp) { io::write_npy(tmp, res.output); });
  if (json_file) outs.stage_bytes(f.json, json);
  outs.commit();
  if (f.json == "-") {
    std::fputs(json.c_str(), stdout);
    return;
  }
  std::string line = f.op + ":";
  for (const auto& in : res.info["inputs"])
    line += " " + shape_str(in["shape"].get<Shape>()) + " " + in["dtype"].get<std::string>();
  line += " -> " + shape_str(res.output.shape()) + " " + res.info["output"]["dtype"].get<std::string>();
  if (res.info.contains("compute_kernel_config")) line += ", " + res.info["compute_kernel_config"].dump();
  if (res.info.contains("tt_metal")) line += ", tt_metal " + res.info["tt_metal"]["profile"].get<std::string>();
  std::cout << line << "\n";
  if (res.info.contains("notes"))
    for (const auto& n : res.info["notes"]) std::cout << "note: " << n.get<std::string>() << "\n";
  std::cout << "wrote " << f.output << "\n";
}

}  // namespace

void add_op(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<OpFlags>();
  // The op list, operands, defaults and op-specific options come from the
  // op table (backends/ttsim/op_table.h).
  auto* sub = app.add_subcommand("op", "Run one TT-NN op on tt-sim: " + ttsim::tt_op_synopsis());
  sub->footer(ttsim::tt_op_help() + "Backend options (--option KEY=VALUE; a config's tt-sim backend object):\n" +
              ttsim::tt_options_help());
  sub->add_option("OP", f->op, "the op (listed below)")->required();
  sub->add_option("INPUTS", f->inputs, "FILE.npy, FILE.npz:NAME or FILE.safetensors:NAME, in the op's order")
      ->required();
  sub->add_option("--output,-o", f->output, "write the result as float32 .npy (the device values exactly)")
      ->required();
  sub->add_option("--dtype", f->dtype, "every input's dtype: bfloat16 (default), bfloat8_b, bfloat4_b, float32");
  for (int i = 0; i < 4; ++i)
    sub->add_option("--in" + std::to_string(i) + "-dtype", f->in_dtype[i],
                    "input " + std::to_string(i) + "'s dtype (overrides --dtype)");
  sub->add_option("--output-dtype", f->output_dtype, "the op's output dtype (default: input 0's)");
  sub->add_option("--math-fidelity", f->math_fidelity, "LoFi, HiFi2, HiFi3, HiFi4 (default: the op's TT-NN default)");
  sub->add_flag("--fp32-dest-acc-en{true}", f->fp32_dest_acc_en,
                "accumulate in an FP32 Dst (=false to force it off; default: the op's TT-NN default)");
  sub->add_flag("--math-approx-mode{true}", f->math_approx_mode,
                "SFPU approximations (=false to force them off; default: the op's TT-NN default)");
  sub->add_option("--device", f->device, "wormhole_b0 (default), grayskull, blackhole");
  sub->add_option("--memory-config", f->memory_config, "L1 or DRAM (default DRAM)");
  sub->add_option("--option", f->options,
                  "any tt-sim backend option, or the op's own (listed below), as KEY=VALUE (core_grid=[8,8], "
                  "threads=2, kernels=scalar, ...); repeatable")
      ->allow_extra_args(false);  // one KEY=VALUE per --option: INPUTS stay positional
  sub->add_option("--scalar", f->scalar, "multiply: ttnn.multiply(A, S) by this float");
  for (const ttsim::OpParam& flag : ttsim::tt_op_flags())
    sub->add_option(ttsim::op_flag_name(flag.key), f->params[flag.key], flag.help);
  sub->add_option("--json", f->json, "write op, shapes, dtypes, compute config and program cache as JSON (- for stdout)");
  sub->callback([f, sub, &exit_code]() {
    exit_code = 2;
    // Under mpirun only rank 0 reads and writes; the others run their share
    // of the heads (parallel/op_heads.h).
    if (parallel::rank() != 0) {
      exit_code = serve_rank();
      return;
    }
    op_command(*f, sub);
    exit_code = 0;
  });
}

}  // namespace mha::cli
