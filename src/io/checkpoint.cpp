#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "io/checkpoint_index.h"
#include "io/tensor_file.h"
#include "util/error.h"
#include "util/read_file.h"
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
      if (std::find(shards_.begin(), shards_.end(), path) != shards_.end()) {
        spdlog::info("{} is a shard of {}: following the index", path, index_path);
        return;
      }
      // The index beside it does not list it: read the file on its own.
      names_.clear(), shard_of_.clear(), shards_.clear(), table_.clear();
      source_ = path;
    }
    auto reader = std::make_unique<SafetensorsReader>(path);
    names_ = reader->names();
    shards_ = {path};
    shard_of_.assign(names_.size(), 0);
    readers_.emplace(0, std::move(reader));
    index_names();
    return;
  }
  loaded_ = read_all(path);
  for (const auto& nt : loaded_) names_.push_back(nt.first);
  index_names();
}

Checkpoint::~Checkpoint() = default;

void Checkpoint::open_index(const std::string& index_path) {
  source_ = index_path;
  CheckpointIndex index = parse_checkpoint_index(read_input_file(index_path), index_path);
  names_ = std::move(index.names);
  shard_of_ = std::move(index.shard_of);
  shards_ = std::move(index.shards);
  index_names();
}

void Checkpoint::index_names() {
  if (names_.size() >= (std::size_t{1} << 31))
    throw InputError(printable(source_, 400) + ": lists " + std::to_string(names_.size()) + " tensors, more than 2^31");
  std::size_t cap = 16;
  while (cap < 2 * names_.size()) cap *= 2;
  table_.assign(cap, {0, 0});
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const uint64_t h = std::hash<std::string_view>{}(names_[i]);
    for (std::size_t s = h & (cap - 1);; s = (s + 1) & (cap - 1)) {
      auto& [sh, pos] = table_[s];
      if (pos == 0) {
        sh = h, pos = static_cast<uint32_t>(i + 1);
        break;
      }
      if (sh == h && names_[pos - 1] == names_[i])
        throw InputError(printable(source_, 400) + ": tensor '" + printable(names_[i]) + "' is listed twice");
    }
  }
}

std::size_t Checkpoint::find(std::string_view name) const {
  if (table_.empty()) return kNone;
  const std::size_t cap = table_.size();
  const uint64_t h = std::hash<std::string_view>{}(name);
  for (std::size_t s = h & (cap - 1);; s = (s + 1) & (cap - 1)) {
    const auto& [sh, pos] = table_[s];
    if (pos == 0) return kNone;
    if (sh == h && names_[pos - 1] == name) return pos - 1;
  }
}

std::size_t Checkpoint::position(const std::string& name) const {
  const std::size_t pos = find(name);
  if (pos == kNone) throw InputError(printable(source_, 400) + ": holds no tensor '" + printable(name) + "'");
  return pos;
}

const SafetensorsReader* Checkpoint::reader_for(std::size_t pos) const {
  if (!loaded_.empty()) return nullptr;
  const uint32_t id = shard_of_[pos];
  const std::string& file = shards_[id];
  const std::string& name = names_[pos];
  const bool indexed = file != source_;
  auto r = readers_.find(id);
  if (r == readers_.end()) {
    std::error_code ec;
    if (indexed && !fs::exists(file, ec))
      throw InputError(printable(source_, 400) + ": weight_map maps '" + printable(name) + "' to shard " +
                       printable(file, 400) + ", which does not exist");
    r = readers_.emplace(id, std::make_unique<SafetensorsReader>(file)).first;
  }
  if (indexed && !r->second->has(name))
    throw InputError(printable(source_, 400) + ": weight_map maps '" + printable(name) + "' to shard " +
                     printable(file, 400) + ", which holds no such tensor");
  return r->second.get();
}

TensorInfo Checkpoint::info(const std::string& name) const {
  const std::size_t pos = position(name);
  if (const SafetensorsReader* r = reader_for(pos)) return *r->info(name);
  const Tensor& t = loaded_[pos].second;
  return TensorInfo{t.dtype(), t.shape()};
}

NamedTensors Checkpoint::read(const std::vector<std::string>& names) const {
  NamedTensors out;
  for (const std::string& name : names) {
    const std::size_t pos = position(name);
    if (const SafetensorsReader* r = reader_for(pos)) out.emplace_back(name, r->read(name));
    else out.emplace_back(name, loaded_[pos].second);
  }
  return out;
}

}  // namespace mha::io
