#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <spdlog/spdlog.h>

#include "config/json_util.h"
#include "io/tensor_file.h"
#include "util/error.h"
#include "util/text.h"

namespace mha::io {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "model-00001-of-00002.safetensors" -> "model.safetensors.index.json" (the
// name Hugging Face's save_pretrained gives the index); "" for other names.
std::string index_name_for_shard(const std::string& file) {
  const std::string ext = ".safetensors";
  if (!ends_with(file, ext)) return "";
  const std::string stem = file.substr(0, file.size() - ext.size());
  const auto of = stem.rfind("-of-");
  if (of == std::string::npos || !all_digits(stem.substr(of + 4))) return "";
  const auto dash = stem.rfind('-', of - 1);
  if (dash == std::string::npos || dash == 0 || !all_digits(stem.substr(dash + 1, of - dash - 1))) return "";
  return stem.substr(0, dash) + ext + ".index.json";
}

}  // namespace

bool is_checkpoint_index(const std::string& path) { return ends_with(path, ".index.json"); }

Checkpoint::Checkpoint(const std::string& path) : source_(path) {
  if (is_checkpoint_index(path)) {
    open_index(path);
    return;
  }
  if (ends_with(path, ".safetensors")) {
    const fs::path p(path);
    const std::string index = index_name_for_shard(p.filename().string());
    std::error_code ec;
    if (!index.empty() && fs::is_regular_file(p.parent_path() / index, ec)) {
      const std::string index_path = (p.parent_path() / index).string();
      open_index(index_path);
      if (std::find(file_of_.begin(), file_of_.end(), path) != file_of_.end()) {
        spdlog::info("{} is a shard of {}: following the index", path, index_path);
        return;
      }
      // The index beside it does not list it: read the file on its own.
      names_.clear();
      file_of_.clear();
      source_ = path;
    }
    SafetensorsReader reader(path);
    names_ = reader.names();
    file_of_.assign(names_.size(), path);
    return;
  }
  loaded_ = read_all(path);
  for (const auto& nt : loaded_) names_.push_back(nt.first);
  file_of_.assign(names_.size(), "");
}

void Checkpoint::open_index(const std::string& index_path) {
  source_ = index_path;
  const std::string where = printable(index_path, 400);
  const ordered_json j = read_json_file(index_path, "checkpoint index");
  if (!j.is_object()) throw InputError(where + ": checkpoint index: expected a JSON object, found " + json_brief(j));
  const ordered_json* map = find(j, "weight_map");
  if (!map || !map->is_object() || map->empty())
    throw InputError(where + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found " +
                     (map ? json_brief(*map) : std::string("no \"weight_map\" key")));
  if (const ordered_json* meta = find(j, "metadata"); meta && !meta->is_object())
    throw InputError(where + ": checkpoint index: \"metadata\" is not a JSON object, found " + json_brief(*meta));
  const fs::path folder = fs::path(index_path).parent_path();
  for (auto it = map->begin(); it != map->end(); ++it) {
    const std::string at = where + ": weight_map." + printable(it.key());
    if (!it->is_string() || it->get<std::string>().empty())
      throw InputError(at + ": expected a shard file name, found " + json_brief(*it));
    const fs::path shard(it->get<std::string>());
    bool escapes = shard.is_absolute() || shard.has_root_name();
    for (const fs::path& part : shard) escapes = escapes || part == "..";
    if (escapes)
      throw InputError(at + ": shard path " + json_brief(*it) + " leaves the index's folder (expected a file name beside the index)");
    names_.push_back(it.key());
    file_of_.push_back((folder / shard).lexically_normal().string());
  }
}

NamedTensors Checkpoint::read(const std::vector<std::string>& names) const {
  // One reader per shard, opened only for the shards that hold a wanted tensor.
  std::map<std::string, SafetensorsReader> readers;
  NamedTensors out;
  for (const std::string& name : names) {
    const auto pos = std::find(names_.begin(), names_.end(), name) - names_.begin();
    if (pos == static_cast<std::ptrdiff_t>(names_.size()))
      throw InputError(printable(source_, 400) + ": holds no tensor '" + printable(name) + "'");
    const std::string& file = file_of_[pos];
    if (file.empty()) {
      out.emplace_back(name, loaded_[pos].second);
      continue;
    }
    const bool indexed = file != source_;
    auto r = readers.find(file);
    if (r == readers.end()) {
      std::error_code ec;
      if (indexed && !fs::exists(file, ec))
        throw InputError(printable(source_, 400) + ": weight_map maps '" + printable(name) + "' to shard " +
                         printable(file, 400) + ", which does not exist");
      r = readers.emplace(file, file).first;
    }
    if (indexed && !r->second.has(name))
      throw InputError(printable(source_, 400) + ": weight_map maps '" + printable(name) + "' to shard " +
                       printable(file, 400) + ", which holds no such tensor");
    out.emplace_back(name, r->second.read(name));
  }
  return out;
}

}  // namespace mha::io
