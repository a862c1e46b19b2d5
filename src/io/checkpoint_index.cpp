#include "io/checkpoint_index.h"

#include <filesystem>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_depth.h"
#include "util/text.h"

namespace mha::io {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// SAX events of the index. Depth 1 is the top object, depth 2 the inside of
// "weight_map" (or of any other top-level value, which is skipped).
class IndexSax : public nlohmann::json_sax<json> {
 public:
  IndexSax(const std::string& path, CheckpointIndex& out)
      : where_(printable(path, 400)), folder_(fs::path(path).parent_path()), out_(out) {}

  bool null() override { return scalar("null"); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return scalar(std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(std::to_string(v)); }
  bool number_float(number_float_t, const string_t& s) override { return scalar(printable(s, 40)); }
  bool binary(binary_t&) override { return scalar("binary data"); }
  bool string(string_t& s) override {
    if (in_map_ && depth_ == 2) {
      if (s.empty()) bad_entry("\"\"");
      add(s);
      return true;
    }
    return scalar("the string \"" + printable(s, 40) + "\"");
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      top_key_ = k;
    } else if (in_map_ && depth_ == 2) {
      key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw InputError(where_ + ": invalid JSON: " + printable(e.what(), 200));
  }

  // After the parse: the checks that need the whole text.
  void finish() const {
    if (!map_seen_)
      throw InputError(where_ + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found "
                                "no \"weight_map\" key");
    if (out_.names.empty())
      throw InputError(where_ + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found {}");
  }

 private:
  // A value that is not an object or array, as it reads in messages.
  bool scalar(const std::string& brief) {
    if (depth_ == 0) throw InputError(where_ + ": checkpoint index: expected a JSON object, found " + brief);
    if (depth_ == 1) top_value(brief);
    else if (in_map_ && depth_ == 2) bad_entry(brief);
    return true;
  }
  bool open(bool object) {
    const char* brief = object ? "an object" : "an array";
    if (depth_ == 0 && !object) throw InputError(where_ + ": checkpoint index: expected a JSON object, found an array");
    if (depth_ == 1) {
      if (!object) {
        top_value(brief);
      } else if (top_key_ == "weight_map") {
        if (map_seen_) throw InputError(where_ + ": checkpoint index: \"weight_map\" appears twice");
        in_map_ = map_seen_ = true;
      }
    } else if (in_map_ && depth_ == 2) {
      bad_entry(brief);
    }
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    if (depth_ == 1) in_map_ = false;
    return true;
  }
  // A top-level value other than an object: wrong for the two keys read.
  void top_value(const std::string& brief) {
    if (top_key_ == "weight_map")
      throw InputError(where_ + ": checkpoint index: expected \"weight_map\": {\"TENSOR\": \"SHARD.safetensors\", ...}, found " +
                       brief);
    if (top_key_ == "metadata")
      throw InputError(where_ + ": checkpoint index: \"metadata\" is not a JSON object, found " + brief);
  }
  [[noreturn]] void bad_entry(const std::string& brief) {
    throw InputError(where_ + ": weight_map." + printable(key_) + ": expected a shard file name, found " + brief);
  }
  void add(const std::string& shard) {
    auto id = shard_ids_.find(shard);
    if (id == shard_ids_.end()) {
      const fs::path p(shard);
      bool escapes = p.is_absolute() || p.has_root_name();
      for (const fs::path& part : p) escapes = escapes || part == "..";
      if (escapes)
        throw InputError(where_ + ": weight_map." + printable(key_) + ": shard path \"" + printable(shard, 200) +
                         "\" leaves the index's folder (expected a file name beside the index)");
      id = shard_ids_.emplace(shard, static_cast<uint32_t>(out_.shards.size())).first;
      out_.shards.push_back((folder_ / p).lexically_normal().string());
    }
    out_.names.push_back(key_);
    out_.shard_of.push_back(id->second);
  }

  std::string where_;
  fs::path folder_;
  CheckpointIndex& out_;
  int depth_ = 0;
  bool in_map_ = false, map_seen_ = false;
  std::string top_key_, key_;
  std::unordered_map<std::string, uint32_t> shard_ids_;
};

}  // namespace

CheckpointIndex parse_checkpoint_index(std::string_view text, const std::string& path) {
  const std::string where = printable(path, 400);
  if (std::size_t deep = json_too_deep_at(text); deep != std::string_view::npos)
    throw InputError(where + ": checkpoint index nests deeper than " + std::to_string(kMaxJsonDepth) +
                     " levels at byte " + std::to_string(deep));
  CheckpointIndex out;
  IndexSax sax(path, out);
  try {
    json::sax_parse(text, &sax);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(where + ": invalid JSON: " + printable(e.what(), 200));
  }
  sax.finish();
  return out;
}

}  // namespace mha::io
