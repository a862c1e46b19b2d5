#include "config/config.h"

#include <filesystem>

#include "config/hf_config.h"
#include "util/error.h"
#include "util/checked_size.h"
#include "util/json_depth.h"
#include "util/text.h"

namespace mha {

namespace fs = std::filesystem;

namespace {

std::string resolve(const std::string& dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(dir) / p).lexically_normal().string();
}

// "a.npz:x" keeps its member name while the file part is resolved.
std::string resolve_spec(const std::string& dir, const std::string& spec) {
  for (const char* ext : {".npz:", ".safetensors:"}) {
    auto pos = spec.rfind(ext);
    if (pos != std::string::npos) {
      std::size_t cut = pos + std::string(ext).size() - 1;
      return resolve(dir, spec.substr(0, cut)) + spec.substr(cut);
    }
  }
  return resolve(dir, spec);
}

Shape parse_shape(const ordered_json& v, const std::string& path) {
  if (!v.is_array() || v.empty()) throw InputError(path + ": expected a non-empty array of dimensions, found " + json_brief(v));
  Shape s;
  for (std::size_t i = 0; i < v.size(); ++i) s.push_back(as_int(v[i], path + "[" + std::to_string(i) + "]", 0));
  // Drawn in float64 at most: refused here, naming the shape, when no
  // machine this size could hold it.
  check_bytes(shape_numel(s), 8, path + " " + shape_str(s));
  return s;
}

WeightsConfig parse_weights(const ordered_json& w, const std::string& dir) {
  WeightsConfig c;
  require_object(w, "weights");
  if (find(w, "init")) {
    check_keys(w, "weights", {"init", "seed"});
    std::string init = as_string(w["init"], "weights.init");
    if (init == "torch") c.kind = WeightsConfig::Kind::TorchInit;
    else if (init == "rand") c.kind = WeightsConfig::Kind::RandInit;
    else throw InputError("weights.init: expected \"torch\" or \"rand\", found " + json_brief(w["init"]));
    c.seed = find(w, "seed") ? as_seed(w["seed"], "weights.seed") : 0;
  } else if (find(w, "file")) {
    check_keys(w, "weights", {"file", "prefix"});
    c.kind = WeightsConfig::Kind::File;
    c.path = resolve(dir, as_string(w["file"], "weights.file"));
  } else if (find(w, "dir")) {
    check_keys(w, "weights", {"dir", "prefix"});
    c.kind = WeightsConfig::Kind::Dir;
    c.path = resolve(dir, as_string(w["dir"], "weights.dir"));
  } else {
    throw InputError("weights: expected one of {\"init\": ...}, {\"file\": ...} or {\"dir\": ...}, found " +
                     json_brief(w));
  }
  if (const ordered_json* p = find(w, "prefix")) {
    c.prefix = as_string(*p, "weights.prefix");
    if (c.prefix->empty()) throw InputError("weights.prefix: expected a non-empty tensor name prefix, found \"\"");
  }
  return c;
}

ModelConfig parse_model(const ordered_json& m, const std::string& dir) {
  require_object(m, "model");
  check_keys(m, "model", {"hf", "layer"});
  if (!find(m, "hf")) throw InputError("model.hf: required key is missing (a Hugging Face model folder)");
  ModelConfig mc;
  mc.hf = resolve(dir, as_string(m["hf"], "model.hf"));
  mc.layer = get_int(m, "layer", "model", 0, 0);
  return mc;
}

DecodeConfig parse_decode(const ordered_json& d) {
  check_keys(d, "decode", {"prompt", "tokens", "cache_dtype", "depth"});
  DecodeConfig dc;
  dc.prompt = get_int(d, "prompt", "decode", std::nullopt, 1);
  dc.tokens = get_int(d, "tokens", "decode", 0, 0);
  dc.depth = get_int(d, "depth", "decode", 0, 0);
  if (dc.depth > kMaxDecodeDepth)
    throw InputError("decode.depth: expected at most " + std::to_string(kMaxDecodeDepth) + " positions, found " +
                     std::to_string(dc.depth));
  // The cache holds depth + prompt + tokens positions: a sum that
  // overflows is refused with the numbers as written.
  const std::string sum = "decode.depth + decode.prompt + decode.tokens (" + std::to_string(dc.depth) + " + " +
                          std::to_string(dc.prompt) + " + " + std::to_string(dc.tokens) + ")";
  checked_add(checked_add(dc.depth, dc.prompt, sum), dc.tokens, sum);
  if (find(d, "cache_dtype")) {
    const auto t = cache_dtype_from_name(as_string(d["cache_dtype"], "decode.cache_dtype"));
    if (t) dc.cache_dtype = *t;
    else throw InputError("decode.cache_dtype: expected one of " + cache_dtype_names() + ", found " + json_brief(d["cache_dtype"]));
  }
  return dc;
}

void parse_inputs(const ordered_json& in, const std::string& dir, RunConfig& c) {
  require_object(in, "inputs");
  for (auto it = in.begin(); it != in.end(); ++it) {
    std::string path = "inputs." + printable(it.key());
    if (it.key() == "seed") {
      c.inputs_seed = as_seed(*it, path);
      continue;
    }
    InputConfig ic;
    ic.name = it.key();
    if (it->is_string()) {
      ic.kind = InputConfig::Kind::File;
      ic.path = resolve_spec(dir, it->get<std::string>());
    } else if (it->is_object() && it->size() == 1 && (find(*it, "rand") || find(*it, "randn"))) {
      bool rand = find(*it, "rand") != nullptr;
      ic.kind = rand ? InputConfig::Kind::Rand : InputConfig::Kind::Randn;
      ic.shape = parse_shape(it->begin().value(), path + (rand ? ".rand" : ".randn"));
    } else {
      throw InputError(path + ": expected a tensor file path, {\"rand\": [shape]} or {\"randn\": [shape]}, found " +
                       json_brief(*it));
    }
    c.inputs.push_back(std::move(ic));
  }
}

}  // namespace

RunConfig parse_config(const ordered_json& j, const std::string& dir, const std::string& file) {
  RunConfig c;
  c.file = file;
  // Configs built in code skip read_json_file's check on the text; the copies
  // below (params, options, backend) recurse, so bound the depth here too.
  if (json_depth(j) > kMaxJsonDepth)
    throw InputError("config: nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  require_object(j, "config");
  check_keys(j, "config", {"name", "variant", "params", "weights", "inputs", "options", "backend", "runs", "reference",
                            "decode", "parallel", "model"});
  c.name = find(j, "name") ? as_string(j["name"], "name") : fs::path(file).stem().string();
  if (find(j, "model")) {
    for (const char* k : {"variant", "params", "weights"})
      if (find(j, k)) throw InputError(std::string(k) + ": \"model\" replaces variant, params and weights; remove it");
    c.model = parse_model(j["model"], dir);
  } else {
    if (!find(j, "variant")) throw InputError("variant: required key is missing");
    c.variant = as_string(j["variant"], "variant");
    if (find(j, "params")) c.params = require_object(j["params"], "params");
    if (find(j, "weights")) c.weights = parse_weights(j["weights"], dir);
  }
  if (find(j, "inputs")) parse_inputs(j["inputs"], dir, c);
  if (find(j, "options")) c.options = require_object(j["options"], "options");
  if (find(j, "backend")) {
    const ordered_json& b = j["backend"];
    if (b.is_string()) {
      c.backend = b.get<std::string>();
    } else {
      require_object(b, "backend");
      for (auto it = b.begin(); it != b.end(); ++it) {
        if (it.key() == "name") c.backend = as_string(*it, "backend.name");
        else c.backend_options[it.key()] = *it;
      }
    }
  }
  if (find(j, "runs")) {
    const ordered_json& r = require_object(j["runs"], "runs");
    check_keys(r, "runs", {"warmup", "iterations"});
    c.warmup = get_int(r, "warmup", "runs", 0, 0);
    c.iterations = get_int(r, "iterations", "runs", 10, 0);  // 0: the first run only
  }
  if (find(j, "reference")) {
    const ordered_json& r = require_object(j["reference"], "reference");
    check_keys(r, "reference", {"file", "atol", "rtol", "pcc"});
    ReferenceConfig rc;
    if (!find(r, "file")) throw InputError("reference.file: required key is missing");
    rc.file = resolve_spec(dir, as_string(r["file"], "reference.file"));
    if (find(r, "atol")) rc.atol = as_number(r["atol"], "reference.atol");
    if (find(r, "rtol")) rc.rtol = as_number(r["rtol"], "reference.rtol");
    if (find(r, "pcc")) rc.pcc = as_number(r["pcc"], "reference.pcc");
    c.reference = rc;
  }
  if (find(j, "decode")) c.decode = parse_decode(require_object(j["decode"], "decode"));
  if (find(j, "parallel")) {
    const ordered_json& p = require_object(j["parallel"], "parallel");
    check_keys(p, "parallel", {"heads", "sequence"});
    if (!find(p, "heads") == !find(p, "sequence"))
      throw InputError("parallel: expected {\"heads\": RANKS} or {\"sequence\": RANKS}, found " + json_brief(p));
    c.parallel = find(p, "heads")
                     ? ParallelConfig{ParallelConfig::Mode::Heads, get_int(p, "heads", "parallel", 1, 1)}
                     : ParallelConfig{ParallelConfig::Mode::Sequence, get_int(p, "sequence", "parallel", 1, 1)};
  }
  if (c.model) resolve_hf_model(c);  // variant, params, weights (and default inputs) from the folder
  return c;
}

RunConfig load_config(const std::string& path) {
  ordered_json j = read_json_file(path, "config file");
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  try {
    return parse_config(j, dir, path);
  } catch (const InputError& e) {
    throw InputError(printable(path, 400) + ": " + e.what());
  }
}

}  // namespace mha
